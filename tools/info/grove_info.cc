// grove-info: what this build of Grove is and how it is configured.
//
//   grove-info           version, build features, every GROVE_* variable
//   grove-info --vars    the variables only
//   grove-info --json    everything as one JSON object (for scripts)
// Each variable shows its type, default, current value (and where it comes
// from: the environment or the default) and its help text.
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/json_text.h"
#include "grove/grove.h"
#include "grove_build_info.h"

namespace grove::tools {
namespace {

const char* typeName(config::Type t) {
  switch (t) {
    case config::Type::kInt: return "int";
    case config::Type::kBool: return "bool";
    case config::Type::kString: return "string";
    case config::Type::kSize: return "size";
    case config::Type::kDouble: return "double";
  }
  return "?";
}


std::vector<std::string> featureLines() {
  std::vector<std::string> lines;
  std::istringstream in(GROVE_BUILD_FEATURES);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string versionText(int* code) {
  *code = 0;
  if (groveGetVersion(code) != groveSuccess) return "unknown";
  return std::to_string(*code / 10000) + "." + std::to_string(*code / 100 % 100) + "." +
         std::to_string(*code % 100);
}

void printVarsText() {
  std::printf("Configuration variables (environment overrides the default):\n");
  for (const config::Var& v : config::all()) {
    auto raw = config::rawValue(v.name);
    std::string def = *v.defaultValue ? v.defaultValue : "(empty)";
    std::printf("\n  %s  [%s]\n", v.name, typeName(v.type));
    std::printf("      default: %s\n", def.c_str());
    if (raw) std::printf("      current: %s  (from the environment)\n", raw->c_str());
    else std::printf("      current: %s\n", def.c_str());
    std::printf("      allowed: %s\n", config::allowedText(v).c_str());
    std::printf("      %s\n", v.help);
  }
}

void printText(bool varsOnly) {
  if (!varsOnly) {
    int code = 0;
    std::string version = versionText(&code);
    std::printf("Grove %s (library version code %d, header %d.%d.%d, build %s %s)\n",
                version.c_str(), code, GROVE_MAJOR, GROVE_MINOR, GROVE_PATCH,
                GROVE_BUILD_VERSION, GROVE_BUILD_TYPE);
    std::printf("\nBuild features:\n");
    for (const std::string& line : featureLines()) std::printf("  %s\n", line.c_str());
    std::printf("\n");
  }
  printVarsText();
}

void printJson(bool varsOnly) {
  std::string out = "{\n";
  if (!varsOnly) {
    int code = 0;
    std::string version = versionText(&code);
    out += "  \"version\": " + grove::jsonQuoted(version) + ",\n";
    out += "  \"version_code\": " + std::to_string(code) + ",\n";
    out += "  \"build_type\": " + grove::jsonQuoted(GROVE_BUILD_TYPE) + ",\n";
    out += "  \"features\": {\n";
    const std::pair<const char*, int> flags[] = {
        {"cuda", GROVE_BUILD_HAVE_CUDA}, {"hwloc", GROVE_BUILD_HAVE_HWLOC},
        {"ibverbs", GROVE_BUILD_HAVE_IBVERBS}, {"mpi", GROVE_BUILD_HAVE_MPI},
        {"torch", GROVE_BUILD_HAVE_TORCH}};
    for (size_t i = 0; i < std::size(flags); ++i)
      out += std::string("    ") + grove::jsonQuoted(flags[i].first) + ": " +
             (flags[i].second ? "true" : "false") + (i + 1 < std::size(flags) ? ",\n" : "\n");
    out += "  },\n  \"feature_lines\": [";
    auto lines = featureLines();
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? ", " : "") + grove::jsonQuoted(lines[i]);
    out += "],\n";
  }
  out += "  \"variables\": [\n";
  const auto& vars = config::all();
  for (size_t i = 0; i < vars.size(); ++i) {
    const config::Var& v = vars[i];
    auto raw = config::rawValue(v.name);
    out += "    {\"name\": " + grove::jsonQuoted(v.name) + ", \"type\": " + grove::jsonQuoted(typeName(v.type)) +
           ", \"default\": " + grove::jsonQuoted(v.defaultValue) +
           ", \"value\": " + grove::jsonQuoted(raw ? *raw : v.defaultValue) +
           ", \"set\": " + (raw ? "true" : "false") +
           ", \"allowed\": " + grove::jsonQuoted(config::allowedText(v)) +
           ", \"help\": " + grove::jsonQuoted(v.help) + "}" +
           (i + 1 < vars.size() ? ",\n" : "\n");
  }
  out += "  ]\n}\n";
  std::fputs(out.c_str(), stdout);
}

}  // namespace
}  // namespace grove::tools

int main(int argc, char** argv) {
  bool json = false, varsOnly = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--vars") == 0) {
      varsOnly = true;
    } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: grove-info [--vars] [--json]\n"
                  "  Prints Grove's version, build features and every GROVE_* variable\n"
                  "  (type, default, current value, help).\n"
                  "  --vars  only the variables\n  --json  machine-readable output\n");
      return 0;
    } else {
      std::fprintf(stderr, "grove-info: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  if (json) grove::tools::printJson(varsOnly);
  else grove::tools::printText(varsOnly);
  return 0;
}
