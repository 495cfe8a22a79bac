#include "base/config.h"

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "base/error.h"
#include "base/log.h"

extern char** environ;

namespace grove::config {

extern const std::vector<Var>& registeredVars();    // config_vars.cc
extern const std::vector<const char*>& toolVars();  // config_vars.cc

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

namespace {
// The library's variables, then the components' (VarTable). Tables are
// added while the program or library loads, before anything reads them.
std::vector<Var>& table() {
  static std::vector<Var> vars = registeredVars();
  return vars;
}
}  // namespace

const std::vector<Var>& all() { return table(); }

VarTable::VarTable(std::initializer_list<Var> vars) {
  for (const Var& v : vars) {
    for (const Var& known : table())
      if (std::string(known.name) == v.name)
        throwInternalError(std::string("config variable ") + v.name + " is registered twice");
    table().push_back(v);
  }
}

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

namespace {

std::string numberText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

bool caseEqual(const std::string& a, const std::string& b) {
  return a.size() == b.size() && strcasecmp(a.c_str(), b.c_str()) == 0;
}

// The '|'-separated choices of a string variable.
std::vector<std::string> choicesOf(const Var& var) {
  std::vector<std::string> out;
  std::string all = var.choices != nullptr ? var.choices : "";
  for (size_t pos = 0; pos <= all.size();) {
    size_t bar = all.find('|', pos);
    if (bar == std::string::npos) bar = all.size();
    out.push_back(all.substr(pos, bar - pos));
    pos = bar + 1;
  }
  return out;
}

// Plain decimal number text: digits with an optional sign, fraction and
// exponent (`real`), nothing else -- no hex, no blanks, no inf or nan.
bool plainNumber(const std::string& t, bool real) {
  if (t.empty()) return false;
  for (char c : t) {
    const bool digit = c >= '0' && c <= '9';
    const bool sign = c == '+' || c == '-';
    if (!digit && !sign && !(real && (c == '.' || c == 'e' || c == 'E'))) return false;
  }
  return (t[0] >= '0' && t[0] <= '9') || t[0] == '+' || t[0] == '-' || (real && t[0] == '.');
}

// Edits (insertions, deletions, substitutions) from a to b.
size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool toolName(const std::string& name) {
  for (const char* t : toolVars()) {
    const std::string tool = t;
    if (tool.back() == '_' ? name.rfind(tool, 0) == 0 : name == tool) return true;
  }
  return false;
}

// Warns once per process about each unknown GROVE_* name set.
void warnUnknownNames() {
  static std::mutex mu;
  static std::vector<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  for (const UnknownName& u : unknownEnvironmentNames()) {
    if (std::find(warned.begin(), warned.end(), u.name) != warned.end()) continue;
    warned.push_back(u.name);
    if (u.closest.empty())
      GROVE_WARN(log::kInit,
                 "%s is set but is not a grove variable: it is ignored (grove-info "
                 "lists them all)",
                 u.name.c_str());
    else
      GROVE_WARN(log::kInit,
                 "%s is set but is not a grove variable: it is ignored (did you mean "
                 "%s?)",
                 u.name.c_str(), u.closest.c_str());
  }
}

[[noreturn]] void refuse(const Var& var, const std::string& text) {
  throwInvalidArgument(std::string(var.name) + "=" + text + " is not allowed: it must be " +
                       allowedText(var));
}

// v, checked against var's limits (NaN and infinities never pass).
double inLimits(const Var& var, const std::string& text, double v) {
  if (!std::isfinite(v) || v < var.min || v > var.max) refuse(var, text);
  return v;
}

}  // namespace

std::string allowedText(const Var& var) {
  switch (var.type) {
    case Type::kBool: return "a boolean (0/1, true/false, yes/no, on/off)";
    case Type::kString: {
      if (var.choices == nullptr) return "any text";
      std::string out = "one of ";
      for (const std::string& c : choicesOf(var)) out += (out.size() > 7 ? ", " : "") + c;
      return out + " (any case; empty means the default)";
    }
    case Type::kInt:
      return "an integer in [" + numberText(var.min) + ", " + numberText(var.max) + "]";
    case Type::kSize:
      return "a size (bytes, or with K, M or G) in [" + numberText(var.min) + ", " +
             numberText(var.max) + "] bytes";
    case Type::kDouble:
      return "a finite number in [" + numberText(var.min) + ", " + numberText(var.max) + "]";
  }
  return "valid";
}

int64_t getInt(const std::string& name) {
  const Var& var = find(name);
  std::string text = getString(name);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (!plainNumber(text, false) || end == nullptr || *end != '\0' || errno == ERANGE)
    refuse(var, text);
  inLimits(var, text, static_cast<double>(v));
  return v;
}

bool getBool(const std::string& name) {
  std::string t = getString(name);
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off" || t.empty()) return false;
  refuse(find(name), t);
}

uint64_t parseSize(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || !std::isfinite(v) || v < 0 ||
      !plainNumber(text.substr(0, static_cast<size_t>(end - text.c_str())), true))
    throwInvalidArgument("bad size '" + text + "'");
  std::string suffix(end);
  double mult = 1;
  if (suffix == "" || suffix == "B")
    mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB")
    mult = 1024.0;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else
    throwInvalidArgument("bad size suffix in '" + text + "' (use K, M or G)");
  if (v * mult >= 9.2e18) throwInvalidArgument("size '" + text + "' is too large");
  return static_cast<uint64_t>(v * mult);
}

uint64_t getSize(const std::string& name) {
  const Var& var = find(name);
  std::string text = getString(name);
  uint64_t v = 0;
  try {
    v = parseSize(text);
  } catch (const Error&) {
    refuse(var, text);
  }
  inLimits(var, text, static_cast<double>(v));
  return v;
}

double getDouble(const std::string& name) {
  const Var& var = find(name);
  std::string text = getString(name);
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (!plainNumber(text, true) || *end != '\0') refuse(var, text);
  return inLimits(var, text, v);
}

std::string getChoice(const std::string& name) {
  const Var& var = find(name);
  std::string text = getString(name);
  if (text.empty()) return var.defaultValue;
  for (const std::string& c : choicesOf(var))
    if (caseEqual(c, text)) return c;
  refuse(var, text);
}

std::vector<UnknownName> unknownEnvironmentNames() {
  std::vector<UnknownName> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("GROVE_", 0) != 0 || toolName(name)) continue;
    size_t best = 4;  // suggest only a name within three edits
    UnknownName u{name, ""};
    bool known = false;
    for (const Var& var : all()) {
      if (name == var.name) known = true;
      const size_t d = editDistance(name, var.name);
      if (d < best) {
        best = d;
        u.closest = var.name;
      }
    }
    if (!known) out.push_back(u);
  }
  return out;
}

void validateAll() {
  warnUnknownNames();
  for (const Var& var : all()) {
    if (!rawValue(var.name)) continue;
    switch (var.type) {
      case Type::kInt: getInt(var.name); break;
      case Type::kBool: getBool(var.name); break;
      case Type::kSize: getSize(var.name); break;
      case Type::kDouble: getDouble(var.name); break;
      case Type::kString:
        if (var.choices != nullptr) getChoice(var.name);
        break;
    }
  }
}

void setOverride(const std::string& name, std::optional<std::string> value) {
  find(name);
  std::lock_guard<std::mutex> lock(overrideMutex());
  if (value)
    overrides()[name] = *value;
  else
    overrides().erase(name);
}

}  // namespace grove::config
