// grove-info: what this build of Grove is and how it is configured.
//
//   grove-info             version, build features, the transports, the
//                          algorithms, the default selection rules, every
//                          GROVE_* variable
//   grove-info --vars      the variables only
//   grove-info --algos     the algorithm table, the default selection rules
//                          and what they choose per link class (the
//                          transport registry's rows of equal traits)
//   grove-info --nranks N  the choices shown for N ranks (default 4)
//   grove-info --json      everything as one JSON object (for scripts)
// Each variable shows its type, default, current value (and where it comes
// from: the environment or the default) and its help text. Like ucc_info, it
// reads the library's own tables: the transport registry, the algorithm
// table, the rules and the config registry (it links the layers, not libgrove.so).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/select/algorithm_table.h"
#include "algorithms/select/default_rules.h"
#include "algorithms/select/selector.h"
#include "base/config.h"
#include "base/json_text.h"
#include "grove/grove.h"
#include "grove_build_info.h"
#include "transports/registry.h"

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
    if (raw)
      std::printf("      current: %s  (from the environment)\n", raw->c_str());
    else
      std::printf("      current: %s\n", def.c_str());
    std::printf("      allowed: %s\n", config::allowedText(v).c_str());
    std::printf("      %s\n", v.help);
  }
}

std::string collList(unsigned colls) {
  std::string out;
  for (int c = 0; c < plan::kNumColls; ++c)
    if (colls & (1u << c))
      out += std::string(out.empty() ? "" : ",") + plan::collName(static_cast<plan::Coll>(c));
  return out;
}

/// The link classes the selection is shown for: the transport registry's
/// rows grouped by equal traits (the selector reads traits, never names).
struct LinkClass {
  std::string names;  ///< the rows of this class, '+'-joined
  LinkTraits traits;
};

std::vector<LinkClass> linkClasses() {
  std::vector<LinkClass> classes;
  for (const transport::TransportEntry& e : transport::registry()) {
    auto it = std::find_if(classes.begin(), classes.end(),
                           [&](const LinkClass& c) { return c.traits == e.traits; });
    if (it == classes.end())
      classes.push_back({e.name, e.traits});
    else
      it->names += std::string("+") + e.name;
  }
  return classes;
}

std::vector<std::string> selectionLines(const LinkClass& c, int nranks) {
  plan::SelectorConfig cfg = plan::SelectorConfig::fromRegistry();
  cfg.gpuLanes = c.traits.deviceRings;
  return plan::Selector(nranks, c.traits, cfg).describeTable();
}

std::string traitsText(const LinkTraits& t) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "latency %g us, %g us per step%s%s", t.latencyUs, t.stepOverheadUs,
                t.sharedMemory ? ", shared memory" : "", t.network() ? ", network" : "");
  return buf;
}

void printTransports() {
  std::printf(
      "Transports (GROVE_TRANSPORT names the byte-stream ones; highest priority first "
      "within a kind):\n");
  for (const transport::TransportEntry& e : transport::registry())
    std::printf("  %-11s %s\n              provides: %s; priority %d; %s\n", e.name, e.description,
                transport::describeProvides(e.provides).c_str(), e.priority,
                traitsText(e.traits).c_str());
  std::printf("\n");
}

std::string transportsJson() {
  std::string out = "  \"transports\": [\n";
  const auto& rows = transport::registry();
  for (size_t i = 0; i < rows.size(); ++i) {
    const transport::TransportEntry& e = rows[i];
    char traits[200];
    std::snprintf(traits, sizeof traits,
                  "{\"latency_us\": %g, \"step_overhead_us\": %g, \"shared_memory\": %s, "
                  "\"slot_links\": %s, \"device_rings\": %s}",
                  e.traits.latencyUs, e.traits.stepOverheadUs,
                  e.traits.sharedMemory ? "true" : "false", e.traits.slotLinks ? "true" : "false",
                  e.traits.deviceRings ? "true" : "false");
    out += "    {\"name\": " + grove::jsonQuoted(e.name) +
           ", \"description\": " + grove::jsonQuoted(e.description) +
           ", \"provides\": " + grove::jsonQuoted(transport::describeProvides(e.provides)) +
           ", \"priority\": " + std::to_string(e.priority) + ", \"traits\": " + traits + "}" +
           (i + 1 < rows.size() ? ",\n" : "\n");
  }
  return out + "  ],\n";
}

void printAlgos(int nranks) {
  std::printf("Algorithms (GROVE_ALGO names):\n");
  for (const plan::AlgoInfo& a : plan::algorithmTable())
    std::printf("  %-9s %s%s\n            runs: %s\n", a.name, a.description,
                a.needsPlans ? " [needs topology plans]" : "", collList(a.colls).c_str());
  std::printf("\nDefault selection rules (first that applies and is allowed wins, per band):\n");
  for (const std::string& line : plan::describeRules()) std::printf("  %s\n", line.c_str());
  for (const LinkClass& c : linkClasses()) {
    std::printf("\nWhat they choose over %s links, %d ranks (GROVE_* settings applied):\n",
                c.names.c_str(), nranks);
    for (const std::string& line : selectionLines(c, nranks)) std::printf("  %s\n", line.c_str());
  }
  std::printf("\n");
}

void printText(bool varsOnly, bool algosOnly, int nranks) {
  if (algosOnly) {
    printAlgos(nranks);
    return;
  }
  if (!varsOnly) {
    int code = 0;
    std::string version = versionText(&code);
    std::printf("Grove %s (library version code %d, header %d.%d.%d, build %s %s)\n",
                version.c_str(), code, GROVE_MAJOR, GROVE_MINOR, GROVE_PATCH, GROVE_BUILD_VERSION,
                GROVE_BUILD_TYPE);
    std::printf("\nBuild features:\n");
    for (const std::string& line : featureLines()) std::printf("  %s\n", line.c_str());
    std::printf("\n");
    printTransports();
    printAlgos(nranks);
  }
  printVarsText();
}

std::string algosJson(int nranks) {
  std::string out = "  \"algorithms\": [\n";
  const auto& table = plan::algorithmTable();
  for (size_t i = 0; i < table.size(); ++i)
    out += "    {\"name\": " + grove::jsonQuoted(table[i].name) +
           ", \"description\": " + grove::jsonQuoted(table[i].description) +
           ", \"needs_plans\": " + (table[i].needsPlans ? "true" : "false") +
           ", \"collectives\": " + grove::jsonQuoted(collList(table[i].colls)) + "}" +
           (i + 1 < table.size() ? ",\n" : "\n");
  out += "  ],\n  \"selection_rules\": [";
  const auto rules = plan::describeRules();
  for (size_t i = 0; i < rules.size(); ++i) out += (i ? ", " : "") + grove::jsonQuoted(rules[i]);
  out += "],\n  \"selection\": {\"nranks\": " + std::to_string(nranks);
  for (const LinkClass& c : linkClasses()) {
    out += ", " + grove::jsonQuoted(c.names) + ": [";
    const auto lines = selectionLines(c, nranks);
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? ", " : "") + grove::jsonQuoted(lines[i]);
    out += "]";
  }
  return out + "},\n";
}

void printJson(bool varsOnly, bool algosOnly, int nranks) {
  std::string out = "{\n";
  if (algosOnly) {
    out += algosJson(nranks);
    out.resize(out.size() - 2);  // the trailing ",\n"
    std::fputs((out + "\n}\n").c_str(), stdout);
    return;
  }
  if (!varsOnly) {
    int code = 0;
    std::string version = versionText(&code);
    out += "  \"version\": " + grove::jsonQuoted(version) + ",\n";
    out += "  \"version_code\": " + std::to_string(code) + ",\n";
    out += "  \"build_type\": " + grove::jsonQuoted(GROVE_BUILD_TYPE) + ",\n";
    out += "  \"features\": {\n";
    const std::pair<const char*, int> flags[] = {{"cuda", GROVE_HAVE_CUDA},
                                                 {"hwloc", GROVE_HAVE_HWLOC},
                                                 {"ibverbs", GROVE_HAVE_IBVERBS},
                                                 {"mpi", GROVE_HAVE_MPI},
                                                 {"torch", GROVE_HAVE_TORCH}};
    for (size_t i = 0; i < std::size(flags); ++i)
      out += std::string("    ") + grove::jsonQuoted(flags[i].first) + ": " +
             (flags[i].second ? "true" : "false") + (i + 1 < std::size(flags) ? ",\n" : "\n");
    out += "  },\n  \"feature_lines\": [";
    auto lines = featureLines();
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? ", " : "") + grove::jsonQuoted(lines[i]);
    out += "],\n";
    out += transportsJson();
    out += algosJson(nranks);
  }
  out += "  \"variables\": [\n";
  const auto& vars = config::all();
  for (size_t i = 0; i < vars.size(); ++i) {
    const config::Var& v = vars[i];
    auto raw = config::rawValue(v.name);
    out += "    {\"name\": " + grove::jsonQuoted(v.name) +
           ", \"type\": " + grove::jsonQuoted(typeName(v.type)) +
           ", \"default\": " + grove::jsonQuoted(v.defaultValue) +
           ", \"value\": " + grove::jsonQuoted(raw ? *raw : v.defaultValue) +
           ", \"set\": " + (raw ? "true" : "false") +
           ", \"allowed\": " + grove::jsonQuoted(config::allowedText(v)) +
           ", \"help\": " + grove::jsonQuoted(v.help) + "}" + (i + 1 < vars.size() ? ",\n" : "\n");
  }
  out += "  ]\n}\n";
  std::fputs(out.c_str(), stdout);
}

}  // namespace
}  // namespace grove::tools

int main(int argc, char** argv) {
  bool json = false, varsOnly = false, algosOnly = false;
  int nranks = 4;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--vars") == 0) {
      varsOnly = true;
    } else if (std::strcmp(argv[i], "--algos") == 0) {
      algosOnly = true;
    } else if (std::strcmp(argv[i], "--nranks") == 0 && i + 1 < argc) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 1 << 20) {
        std::fprintf(stderr, "grove-info: --nranks wants a rank count >= 1, got '%s'\n", argv[i]);
        return 2;
      }
      nranks = static_cast<int>(n);
    } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::printf(
          "usage: grove-info [--vars | --algos] [--nranks N] [--json]\n"
          "  Prints Grove's version, build features, the algorithm table, the default\n"
          "  selection rules and every GROVE_* variable (type, default, current value,\n"
          "  help).\n"
          "  --vars      only the variables\n"
          "  --algos     only the algorithms, the rules and what they choose\n"
          "  --nranks N  show the choices for N ranks (default 4)\n"
          "  --json      machine-readable output\n");
      return 0;
    } else {
      std::fprintf(stderr, "grove-info: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  try {
    if (json)
      grove::tools::printJson(varsOnly, algosOnly, nranks);
    else
      grove::tools::printText(varsOnly, algosOnly, nranks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grove-info: %s\n", e.what());
    return 1;
  }
  return 0;
}
