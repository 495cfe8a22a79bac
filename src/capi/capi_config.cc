// groveGetConfig: a configuration variable's value, as the library reads it,
// for programs outside the library (launchers, perf binaries, bindings).
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "capi/handles.h"

using grove::capi::apiCall;
namespace config = grove::config;

namespace {

/// The variable's value in canonical text (throws on a value it refuses).
std::string canonicalValue(const config::Var& var) {
  switch (var.type) {
    case config::Type::kInt: return std::to_string(config::getInt(var.name));
    case config::Type::kBool: return config::getBool(var.name) ? "1" : "0";
    case config::Type::kSize: return std::to_string(config::getSize(var.name));
    case config::Type::kDouble: {
      char text[40];
      std::snprintf(text, sizeof text, "%.17g", config::getDouble(var.name));
      return text;
    }
    case config::Type::kString:
      return var.choices != nullptr ? config::getChoice(var.name) : config::getString(var.name);
  }
  return config::getString(var.name);
}

}  // namespace

GROVE_API groveResult_t groveGetConfig(const char* name, char* value, size_t len, int* isSet) {
  return apiCall("groveGetConfig", nullptr, [&] {
    if (name == nullptr) grove::throwInvalidArgument("name is NULL");
    if (value == nullptr) grove::throwInvalidArgument("value is NULL");
    const config::Var* var = nullptr;
    for (const config::Var& v : config::all())
      if (std::strcmp(v.name, name) == 0) var = &v;
    if (var == nullptr)
      grove::throwInvalidArgument(std::string("unknown configuration variable ") + name +
                                  " (grove-info lists them)");
    const std::string text = canonicalValue(*var);
    if (text.size() + 1 > len)
      grove::throwInvalidArgument(std::string(name) + "'s value needs " +
                                  std::to_string(text.size() + 1) + " bytes, len is " +
                                  std::to_string(len));
    std::memcpy(value, text.c_str(), text.size() + 1);
    // An empty value means the default, as the library reads it: not set.
    if (isSet != nullptr) {
      const std::optional<std::string> raw = config::rawValue(name);
      *isSet = raw && !raw->empty() ? 1 : 0;
    }
  });
}
