// The typed registry of GROVE_* configuration variables.
//
// Every variable the library reads is declared once, with a type, a default
// and help text: the library's own in config_vars.cc, a component's (a
// transport's) in its own folder through a VarTable beside the code that
// reads them. Code reads values only through this
// registry, never with getenv, so grove-info can print them all and tests can
// override them. Values come from the environment, read when first asked for;
// setOverride() replaces a value for the whole process (tests, tools).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace grove::config {

/// Kind of value a variable holds.
enum class Type { kInt, kBool, kString, kSize, kDouble };

/// One registered variable. A value outside [min, max] (numbers, sizes) or
/// not among `choices` (strings; '|'-separated, case-insensitive; empty
/// text means the default) is refused with an error that names the
/// variable, the value and what is allowed.
struct Var {
  const char* name;               ///< e.g. "GROVE_TIMEOUT"
  Type type;                      ///< how the text is parsed
  const char* defaultValue;       ///< text of the default
  const char* help;               ///< one-line description
  const char* choices = nullptr;  ///< allowed texts of a kString, or null for any
  double min = -9.2e18;           ///< smallest value allowed (kInt, kSize, kDouble)
  double max = 9.2e18;            ///< largest value allowed (kInt, kSize, kDouble)
};

/// Every registered variable, in registration order (config_vars.cc's,
/// then the components' tables).
const std::vector<Var>& all();

/// A component's own variables: constructing one registers them. Define it
/// at namespace scope in the source file that reads them, so they are
/// registered whenever that code is linked in (before main, or when the
/// library is loaded), and grove-info lists them with the rest. A name
/// registered twice is a build error (grove::Error(groveInternalError) at
/// load).
class VarTable {
 public:
  explicit VarTable(std::initializer_list<Var> vars);
};

/// The variable named `name`; throws grove::Error(InternalError) if unknown.
const Var& find(const std::string& name);

/// Raw text of a variable: its override, else the environment, else nullopt.
std::optional<std::string> rawValue(const std::string& name);

/// Current text of a variable (override, environment, or default).
std::string getString(const std::string& name);
/// Integer value; throws grove::Error(InvalidArgument) if the text is not an
/// integer within the variable's limits (as every typed getter does).
int64_t getInt(const std::string& name);
/// Boolean value (1/0, true/false, yes/no, on/off).
bool getBool(const std::string& name);
/// Byte size: integer with optional K/M/G suffix (binary multiples).
uint64_t getSize(const std::string& name);
/// Floating-point value (finite, within the variable's limits).
double getDouble(const std::string& name);
/// A string variable's value as spelled in its choices (case-insensitive
/// match; empty text gives the default); throws if it is not one of them.
std::string getChoice(const std::string& name);

/// Parses every variable that is set (override or environment) as its type
/// and limits say; throws grove::Error(InvalidArgument) naming the first bad
/// one. Communicator creation calls it, so a bad GROVE_* value is refused
/// there instead of silently meaning something else. Numbers are plain
/// decimal (no hex, no leading blanks). It also warns, once per process and
/// name, about every unknown GROVE_* name set (unknownEnvironmentNames).
void validateAll();

/// GROVE_* names set in the environment that the library does not read and
/// the project's scripts and tools do not either (toolVars in
/// config_vars.cc): misspellings, each with the closest registered name
/// ("" when none is close). validateAll() warns once per name.
struct UnknownName {
  std::string name;
  std::string closest;
};
std::vector<UnknownName> unknownEnvironmentNames();

/// What `var` allows, in words ("an integer in [0, 32]", "one of a, b").
std::string allowedText(const Var& var);

/// Replaces the value of a variable for this process (nullopt removes the override).
void setOverride(const std::string& name, std::optional<std::string> value);

/// Parses a byte size such as "4M", "512K", "1G", "4096"; throws on bad text.
uint64_t parseSize(const std::string& text);

}  // namespace grove::config
