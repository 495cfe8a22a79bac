#include "base/config.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "base/error.h"

namespace grove::config {

extern const std::vector<Var>& registeredVars();  // config_vars.cc

namespace {
std::mutex& overrideMutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::string>& overrides() {
  static std::map<std::string, std::string> o;
  return o;
}
}  // namespace

const std::vector<Var>& all() { return registeredVars(); }

const Var& find(const std::string& name) {
  for (const Var& v : all())
    if (name == v.name) return v;
  throwInternalError("unregistered config variable " + name);
}

std::optional<std::string> rawValue(const std::string& name) {
  find(name);
  {
    std::lock_guard<std::mutex> lock(overrideMutex());
    auto it = overrides().find(name);
    if (it != overrides().end()) return it->second;
  }
  const char* env = std::getenv(name.c_str());  // the one place the environment is read
  if (env != nullptr) return std::string(env);
  return std::nullopt;
}

std::string getString(const std::string& name) {
  auto raw = rawValue(name);
  return raw ? *raw : std::string(find(name).defaultValue);
}

int64_t getInt(const std::string& name) {
  std::string text = getString(name);
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (text.empty() || end == nullptr || *end != '\0')
    throwInvalidArgument(name + "=" + text + " is not an integer");
  return v;
}

bool getBool(const std::string& name) {
  std::string t = getString(name);
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off" || t.empty()) return false;
  throwInvalidArgument(name + "=" + t + " is not a boolean (use 0 or 1)");
}

uint64_t parseSize(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || v < 0) throwInvalidArgument("bad size '" + text + "'");
  std::string suffix(end);
  double mult = 1;
  if (suffix == "" || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") mult = 1024.0;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB") mult = 1024.0 * 1024 * 1024;
  else throwInvalidArgument("bad size suffix in '" + text + "' (use K, M or G)");
  return static_cast<uint64_t>(v * mult);
}

uint64_t getSize(const std::string& name) {
  std::string text = getString(name);
  try {
    return parseSize(text);
  } catch (const Error&) {
    throwInvalidArgument(name + "=" + text + " is not a size (e.g. 4M)");
  }
}

double getDouble(const std::string& name) {
  std::string text = getString(name);
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throwInvalidArgument(name + "=" + text + " is not a number");
  return v;
}

void setOverride(const std::string& name, std::optional<std::string> value) {
  find(name);
  std::lock_guard<std::mutex> lock(overrideMutex());
  if (value) overrides()[name] = *value;
  else overrides().erase(name);
}

}  // namespace grove::config
