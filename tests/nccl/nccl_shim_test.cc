// grove's libnccl.so.2 against NCCL itself, every version the build found
// (nccl.cmake: the CUDA toolkit's, the wheel torch depends on, the newest
// the shim implements):
// - Abi: every size, offset and value of nccl_abi.h equals each nccl.h's
//   (rows that may differ between versions compared with the same version
//   only).
// - Symbols: every function each NCCL libnccl.so.2 exports is exported by
//   grove's (the device API's host side as refusals: libtorch_cuda links
//   those names), and nothing else is; the diff is printed per version.
// - Clients: nccl_client, built against each nccl.h and linked to that
//   NCCL's own library, runs every collective, group, split, window,
//   suspend/resume and the parameter API under grove-launch on the
//   emulated device with grove's library first on the loader path, and
//   checks every element.
// - EnvNames: NCCL_* variables set the GROVE_* ones; grove's own win.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "multiproc/mp_spawn.h"
#include "nccl/abi_rows.h"
#include "nccl_abi.h"

namespace {

struct Oracle {
  std::string version;  ///< "2.30.7"
  std::string client;   ///< nccl_client built against its nccl.h
  std::string abi;      ///< prints its nccl.h's ABI rows
  std::string lib;      ///< its libnccl.so.2
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<Oracle> oracles() {
  std::vector<Oracle> out;
  for (const std::string& entry : split(GROVE_NCCL_ORACLES, ',')) {
    const std::vector<std::string> f = split(entry, '|');
    if (f.size() == 4) out.push_back({f[0], f[1], f[2], f[3]});
  }
  return out;
}

int versionCode(const std::string& v) {
  const std::vector<std::string> p = split(v, '.');
  return p.size() == 3 ? std::stoi(p[0]) * 10000 + std::stoi(p[1]) * 100 + std::stoi(p[2]) : 0;
}

std::string shimVersion() {
  return std::to_string(GROVE_NCCL_MAJOR) + "." + std::to_string(GROVE_NCCL_MINOR) + "." +
         std::to_string(GROVE_NCCL_PATCH);
}

// The newest oracle's client (the shim's own header's when there is none).
std::string newestClient() {
  std::string best = GROVE_NCCL_CLIENT_PATH;
  int bestCode = 0;
  for (const Oracle& o : oracles())
    if (versionCode(o.version) > bestCode) bestCode = versionCode(o.version), best = o.client;
  return best;
}

std::string runOutput(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(NcclShim, Abi) {
  const std::vector<Oracle> all = oracles();
  if (all.empty())
    GTEST_SKIP() << "the build found no NCCL (nccl.h and libnccl.so.2) to compare with";
  std::map<std::string, ncclabi::Row> shim;
  for (const ncclabi::Row& r : ncclabi::shimRows()) shim[r.name] = r;
  bool sawOwnVersion = false;
  for (const Oracle& o : all) {
    const bool same = o.version == shimVersion();
    sawOwnVersion |= same;
    size_t rows = 0, compared = 0;
    for (const std::string& line : split(runOutput("'" + o.abi + "'"), '\n')) {
      const std::vector<std::string> f = split(line, '\t');
      ASSERT_EQ(f.size(), 3u) << o.abi << " printed: " << line;
      if (f[0] == "version") {
        EXPECT_EQ(versionCode(o.version), std::stoi(f[1])) << o.abi;
        continue;
      }
      ++rows;
      auto it = shim.find(f[0]);
      if (it == shim.end()) {
        ADD_FAILURE() << "NCCL " << o.version << "'s nccl.h has " << f[0]
                      << "; nccl_abi.h does not";
        continue;
      }
      if (f[2] == "1" && !same) continue;  // may differ between versions
      ++compared;
      EXPECT_EQ(std::stoll(f[1]), it->second.value) << f[0] << " (NCCL " << o.version << ")";
    }
    EXPECT_GT(rows, 50u) << o.abi << " printed too few rows";
    if (same) {
      EXPECT_EQ(rows, shim.size()) << "nccl_abi.h has rows NCCL " << o.version << " lacks";
    }
    printf("[ NCCL %s nccl.h: %zu rows, %zu compared value for value ]\n", o.version.c_str(), rows,
           compared);
  }
  if (!sawOwnVersion)
    printf("[ no NCCL %s at hand: the shim's newest rows were not compared ]\n",
           shimVersion().c_str());
}

std::set<std::string> exportedNames(const std::string& lib) {
  std::set<std::string> names;
  FILE* p = popen(("nm -D --defined-only '" + lib + "' 2>&1").c_str(), "r");
  if (p == nullptr) return names;
  char line[512], kind[8], name[400];
  unsigned long long addr;
  while (std::fgets(line, sizeof line, p) != nullptr)
    if (std::sscanf(line, "%llx %7s %399s", &addr, kind, name) == 3) names.insert(name);
  pclose(p);
  return names;
}

TEST(NcclShim, Symbols) {
  const std::vector<Oracle> all = oracles();
  if (all.empty()) GTEST_SKIP() << "the build found no libnccl.so.2";
  const std::set<std::string> ours = exportedNames(GROVE_NCCL_SHIM_LIB);
  size_t ourFunctions = 0;
  for (const std::string& name : ours) {
    EXPECT_TRUE(name.rfind("nccl", 0) == 0 || name.rfind("pnccl", 0) == 0)
        << "grove's libnccl.so.2 exports " << name;
    ourFunctions += name.rfind("nccl", 0) == 0;
  }
  for (const Oracle& o : all) {
    const std::set<std::string> theirs = exportedNames(o.lib);
    ASSERT_GT(theirs.size(), 50u) << "nm read nothing from " << o.lib;
    std::string missing;
    size_t functions = 0;
    for (const std::string& name : theirs) {
      if (name.rfind("nccl", 0) != 0 && name.rfind("pnccl", 0) != 0) continue;
      functions += name.rfind("nccl", 0) == 0;
      if (!ours.count(name)) missing += " " + name;
    }
    printf("[ NCCL %s exports %zu nccl* functions; grove's library %zu; missing:%s ]\n",
           o.version.c_str(), functions, ourFunctions, missing.empty() ? " none" : missing.c_str());
    EXPECT_TRUE(missing.empty()) << "NCCL " << o.version
                                 << " exports these and grove's libnccl.so.2 does not:" << missing;
  }
}

mptest::RunResult runClient(int n, const std::vector<std::string>& extraEnv,
                            const std::vector<std::string>& args = {},
                            const std::string& client = newestClient()) {
  const std::string dir = mptest::makeTempDir("nccl");
  std::vector<std::string> argv = {
      GROVE_LAUNCH_PATH, "-n", std::to_string(n), "--timeout", "200", "--", client};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = {"GROVE_DEVICE_EMULATION=1", "GROVE_TIMEOUT=30",
                                  std::string("LD_LIBRARY_PATH=") + GROVE_NCCL_SHIM_DIR};
  env.insert(env.end(), extraEnv.begin(), extraEnv.end());
  return mptest::runCommand(argv, env, 220, dir + "/out.txt");
}

void expectClientPasses(int n, const std::string& transport, const std::string& client,
                        const std::string& header) {
  const mptest::RunResult r = runClient(n, {"GROVE_TRANSPORT=" + transport}, {}, client);
  printf("[ client of NCCL %s's nccl.h, n=%d %s ] %.1f s\n", header.c_str(), n, transport.c_str(),
         r.seconds);
  EXPECT_TRUE(r.ok()) << r.output;
  for (int rank = 0; rank < n; ++rank) {
    const std::string head =
        "nccl_client: rank " + std::to_string(rank) + " of " + std::to_string(n) + " on ";
    const size_t at = r.output.find(head);
    ASSERT_NE(at, std::string::npos) << "rank " << rank << " did not finish:\n" << r.output;
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(line.find(std::string(GROVE_NCCL_SHIM_DIR) + "/libnccl.so.2"), std::string::npos)
        << "the client did not run on grove's library: " << line;
    EXPECT_NE(line.find("(NCCL " + std::to_string(GROVE_NCCL_VERSION_CODE) + ")"),
              std::string::npos)
        << line;
    EXPECT_NE(line.find(" 0 failed"), std::string::npos) << line;
  }
}

// Every header's client on 2 ranks; the newest's also on 3 (sockets) and 4.
TEST(NcclShim, ClientEveryHeaderTwoRanksShm) {
  const std::vector<Oracle> all = oracles();
  if (all.empty())
    expectClientPasses(2, "shm", GROVE_NCCL_CLIENT_PATH, shimVersion() + " (grove's)");
  for (const Oracle& o : all) expectClientPasses(2, "shm", o.client, o.version);
}
TEST(NcclShim, ClientThreeRanksSocket) {
  expectClientPasses(3, "socket", newestClient(), "newest");
}
TEST(NcclShim, ClientFourRanksShm) { expectClientPasses(4, "shm", newestClient(), "newest"); }

TEST(NcclShim, EnvNames) {
  const mptest::RunResult r =
      runClient(1,
                {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=GRAPH,INIT,PROXY",
                 "NCCL_ALGO=allreduce:nvls,tree;broadcast:Ring", "NCCL_SOCKET_IFNAME=eth9",
                 "GROVE_SOCKET_IFNAME=lo", "NCCL_SHM_DISABLE=1", "NCCL_P2P_DISABLE=1"},
                {"--env"});
  ASSERT_TRUE(r.ok()) << r.output;
  for (const char* want : {"GROVE_DEBUG=INFO", "GROVE_DEBUG_SUBSYS=TOPO,INIT",
                           "GROVE_ALGO=allreduce:tree;broadcast:ring", "GROVE_SOCKET_IFNAME=lo",
                           "GROVE_TRANSPORT=socket", "GROVE_P2P_DISABLE=1"})
    EXPECT_NE(r.output.find(want), std::string::npos) << want << " missing:\n" << r.output;

  const mptest::RunResult nvls = runClient(1, {"NCCL_ALGO=NVLS", "NCCL_DEBUG=VERSION"}, {"--env"});
  ASSERT_TRUE(nvls.ok()) << nvls.output;
  EXPECT_NE(nvls.output.find("NCCL_ALGO=NVLS has no grove equivalent"), std::string::npos)
      << nvls.output;
  EXPECT_NE(nvls.output.find("GROVE_ALGO=(unset)"), std::string::npos) << nvls.output;
  EXPECT_NE(nvls.output.find("GROVE_DEBUG=WARN"), std::string::npos) << nvls.output;
}

}  // namespace
