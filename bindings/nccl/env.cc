// NCCL's environment names, mapped onto grove's. Users of NCCL set
// NCCL_DEBUG=INFO or NCCL_SOCKET_IFNAME=eth0 and expect them to work; the
// table below says, for each NCCL name, the grove variable it sets and how
// its value translates. A grove variable the user set wins: the shim never
// overwrites a GROVE_* value it did not write itself. A value with no grove
// meaning (NCCL_ALGO=NVLS) is skipped with one warning. docs/nccl-shim.md
// prints the same table for users.
#include <strings.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "shim.h"

namespace grove::nccl {
namespace {

// Translates an NCCL value; "" means "nothing to set": with *why set, the
// value has no grove equivalent (warned once); without, it asks for nothing.
using Translate = std::string (*)(const std::string& value, std::string* why);

// Writes a grove value in NCCL's terms (the parameter API's answer).
using Untranslate = std::string (*)(const std::string& groveValue);

struct EnvName {
  const char* nccl;
  const char* grove;
  Translate translate;      ///< null: the value carries over unchanged
  Untranslate untranslate;  ///< null: grove's value is already NCCL's
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// NCCL_DEBUG: VERSION and ABORT have no grove level; both log warnings.
std::string debugLevel(const std::string& v, std::string* why) {
  const std::string l = lower(v);
  if (l == "none" || l == "warn" || l == "info" || l == "trace") return v;
  if (l == "version" || l == "abort") return "WARN";
  *why = "grove's levels are NONE, WARN, INFO and TRACE";
  return "";
}

// NCCL's debug subsystems that grove has, and grove's names for them.
const std::map<std::string, std::string>& subsystemNames() {
  static const std::map<std::string, std::string> names = {
      {"INIT", "INIT"}, {"COLL", "COLL"},  {"P2P", "P2P"},     {"SHM", "SHM"},       {"NET", "NET"},
      {"ALL", "ALL"},   {"GRAPH", "TOPO"}, {"TUNING", "PLAN"}, {"BOOTSTRAP", "BOOT"}};
  return names;
}

// GROVE_DEBUG_SUBSYS back in NCCL's names (a grove-only name stays as it is).
std::string subsystemsToNccl(const std::string& v) {
  const bool exclude = !v.empty() && v[0] == '^';
  std::string out;
  for (const std::string& item : splitOn(exclude ? v.substr(1) : v, ',')) {
    std::string name = item;
    for (const auto& [nccl, grove] : subsystemNames())
      if (grove == item) name = nccl;
    out += (out.empty() ? "" : ",") + name;
  }
  return (exclude && !out.empty() ? "^" : "") + out;
}

// GROVE_TRANSPORT back as NCCL_SHM_DISABLE: sockets only means no shm.
std::string transportToShmDisable(const std::string& v) { return v == "socket" ? "1" : "0"; }

// NCCL_DEBUG_SUBSYS: the subsystems grove has, under grove's names; a
// leading ^ (exclude) carries over.
std::string debugSubsystems(const std::string& v, std::string* why) {
  const std::map<std::string, std::string>& names = subsystemNames();
  const bool exclude = !v.empty() && v[0] == '^';
  std::string out;
  for (std::string item : splitOn(exclude ? v.substr(1) : v, ',')) {
    for (char& c : item) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    auto it = names.find(item);
    if (it == names.end())
      continue;  // ENV, ALLOC, CALL, PROXY, NVLS, ...: no grove logs of that kind
    out += (out.empty() ? "" : ",") + it->second;
  }
  if (out.empty())
    *why =
        "none of its subsystems exists in grove (INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, "
        "BOOTSTRAP do)";
  return out.empty() ? "" : (exclude ? "^" : "") + out;
}

// NCCL_ALGO: "Ring", "Tree,Ring" or "allreduce:tree;broadcast:ring". grove
// takes one algorithm per collective: the first one grove has.
std::string algorithms(const std::string& v, std::string* why) {
  auto firstKnown = [](const std::string& list) -> std::string {
    if (!list.empty() && list[0] == '^') return "";  // exclusion lists have no grove form
    for (const std::string& a : splitOn(list, ',')) {
      const std::string l = lower(a);
      if (l == "ring" || l == "tree") return l;
    }
    return "";
  };
  std::string out;
  for (const std::string& part : splitOn(v, ';')) {
    const size_t colon = part.find(':');
    if (colon == std::string::npos) {
      out = firstKnown(part);
      if (!out.empty()) break;
      continue;
    }
    const std::string algo = firstKnown(part.substr(colon + 1));
    if (algo.empty()) continue;
    out += (out.empty() ? "" : ";") + lower(part.substr(0, colon)) + ":" + algo;
  }
  if (out.empty()) *why = "grove has ring and tree of NCCL's algorithms, and no exclusion list";
  return out;
}

// NCCL_SHM_DISABLE=1: no shared memory between the host's ranks, so sockets.
std::string shmDisable(const std::string& v, std::string* why) {
  if (v == "1") return "socket";
  if (v != "0") *why = "NCCL_SHM_DISABLE is 0 or 1";
  return "";
}

const EnvName kNames[] = {
    {"NCCL_DEBUG", "GROVE_DEBUG", debugLevel, nullptr},
    {"NCCL_DEBUG_SUBSYS", "GROVE_DEBUG_SUBSYS", debugSubsystems, subsystemsToNccl},
    {"NCCL_DEBUG_FILE", "GROVE_DEBUG_FILE", nullptr, nullptr},
    {"NCCL_SOCKET_IFNAME", "GROVE_SOCKET_IFNAME", nullptr, nullptr},
    {"NCCL_SOCKET_FAMILY", "GROVE_SOCKET_FAMILY", nullptr, nullptr},
    {"NCCL_COMM_ID", "GROVE_COMM_ID", nullptr, nullptr},
    {"NCCL_ALGO", "GROVE_ALGO", algorithms, nullptr},
    {"NCCL_TOPO_FILE", "GROVE_TOPO_FILE", nullptr, nullptr},
    {"NCCL_TOPO_DUMP_FILE", "GROVE_TOPO_DUMP_FILE", nullptr, nullptr},
    {"NCCL_P2P_DISABLE", "GROVE_P2P_DISABLE", nullptr, nullptr},
    {"NCCL_SHM_DISABLE", "GROVE_TRANSPORT", shmDisable, transportToShmDisable},
    {"NCCL_BUFFSIZE", "GROVE_BUFFSIZE", nullptr, nullptr},
};

// What the shim did so far. Made on first use: the load-time mapping runs
// before this file's static objects would be constructed.
struct Mapped {
  std::mutex mutex;
  std::map<std::string, std::string> written;  // grove name -> the value the shim set
  std::set<std::string> warned;                // "NCCL_X=value" already warned about
};

Mapped& mapped() {
  static Mapped* m = new Mapped;  // never destroyed: mapping may run during exit
  return *m;
}

}  // namespace

void mapNcclEnvironment() {
  Mapped& m = mapped();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto& written = m.written;
  auto& warned = m.warned;
  for (const EnvName& n : kNames) {
    const char* ncclValue = std::getenv(n.nccl);
    if (ncclValue == nullptr) continue;
    const char* groveValue = std::getenv(n.grove);
    auto mine = written.find(n.grove);
    if (groveValue != nullptr && (mine == written.end() || mine->second != groveValue))
      continue;  // the user set the grove name: it wins
    std::string why;
    const std::string value = n.translate ? n.translate(ncclValue, &why) : std::string(ncclValue);
    if (value.empty()) {
      if (why.empty()) continue;  // a value that asks for nothing
      const std::string key = std::string(n.nccl) + "=" + ncclValue;
      if (warned.insert(key).second)
        std::fprintf(stderr, "grove nccl: WARN %s has no grove equivalent (%s); ignored\n",
                     key.c_str(), why.c_str());
      continue;
    }
    setenv(n.grove, value.c_str(), 1);
    written[n.grove] = value;
  }
}

std::vector<const char*> ncclNames() {
  std::vector<const char*> names;
  for (const EnvName& n : kNames) names.push_back(n.nccl);
  return names;
}

bool ncclParam(const char* nccl, NcclParam* out) {
  for (const EnvName& n : kNames) {
    if (std::strcmp(n.nccl, nccl) != 0) continue;
    mapNcclEnvironment();
    char value[4096];
    out->groveName = n.grove;
    if (groveGetConfig(n.grove, value, sizeof value, nullptr) != groveSuccess) return false;
    out->groveValue = value;
    out->value = n.untranslate ? n.untranslate(value) : std::string(value);
    return true;
  }
  return false;
}

namespace {
// Maps the environment as the library loads, before any grove call.
__attribute__((constructor)) void mapAtLoad() { mapNcclEnvironment(); }
}  // namespace

}  // namespace grove::nccl
