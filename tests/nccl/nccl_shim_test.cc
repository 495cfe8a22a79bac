// grove's libnccl.so.2 against NCCL itself:
// - Abi: every size, offset and value of nccl_abi.h equals NCCL's nccl.h.
// - Symbols: every function NCCL's libnccl.so.2 exports is exported by
//   grove's (the device API's host side as refusals: libtorch_cuda links
//   those names), and nothing else is.
// - Client: nccl_client, an NCCL program built against nccl.h (and linked
//   to NCCL's own library when the build found it), runs every collective
//   under grove-launch on the emulated device with grove's library first
//   on the loader path, and checks every element.
// - EnvNames: NCCL_* variables set the GROVE_* ones; grove's own win.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "multiproc/mp_spawn.h"
#include "nccl/abi_rows.h"

namespace {

TEST(NcclShim, Abi) {
  const std::vector<ncclabi::Row> oracle = ncclabi::oracleRows(), shim = ncclabi::shimRows();
  if (oracle.empty()) GTEST_SKIP() << "the build found no nccl.h to compare with";
  ASSERT_EQ(oracle.size(), shim.size());
  for (size_t i = 0; i < oracle.size(); ++i) {
    EXPECT_EQ(oracle[i].name, shim[i].name);
    EXPECT_EQ(oracle[i].value, shim[i].value) << oracle[i].name;
  }
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
  if (std::string(GROVE_NCCL_ORACLE_LIB).empty()) GTEST_SKIP() << "the build found no libnccl.so.2";
  const std::set<std::string> ours = exportedNames(GROVE_NCCL_SHIM_LIB);
  const std::set<std::string> theirs = exportedNames(GROVE_NCCL_ORACLE_LIB);
  ASSERT_GT(theirs.size(), 50u) << "nm read nothing from " << GROVE_NCCL_ORACLE_LIB;
  std::string unexpected;
  for (const std::string& name : theirs) {
    if (name.rfind("nccl", 0) != 0 && name.rfind("pnccl", 0) != 0) continue;
    if (!ours.count(name)) unexpected += " " + name;
  }
  EXPECT_TRUE(unexpected.empty()) << "NCCL exports these and grove's libnccl.so.2 does not:"
                                  << unexpected;
  for (const std::string& name : ours)
    EXPECT_TRUE(name.rfind("nccl", 0) == 0 || name.rfind("pnccl", 0) == 0)
        << "grove's libnccl.so.2 exports " << name;
}

mptest::RunResult runClient(int n, const std::vector<std::string>& extraEnv,
                            const std::vector<std::string>& args = {}) {
  const std::string dir = mptest::makeTempDir("nccl");
  std::vector<std::string> argv = {
      GROVE_LAUNCH_PATH, "-n", std::to_string(n), "--timeout", "200", "--", GROVE_NCCL_CLIENT_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = {"GROVE_DEVICE_EMULATION=1", "GROVE_TIMEOUT=30",
                                  std::string("LD_LIBRARY_PATH=") + GROVE_NCCL_SHIM_DIR};
  env.insert(env.end(), extraEnv.begin(), extraEnv.end());
  return mptest::runCommand(argv, env, 220, dir + "/out.txt");
}

void expectClientPasses(int n, const std::string& transport) {
  const mptest::RunResult r = runClient(n, {"GROVE_TRANSPORT=" + transport});
  printf("[ n=%d %s ] %.1f s\n", n, transport.c_str(), r.seconds);
  EXPECT_TRUE(r.ok()) << r.output;
  for (int rank = 0; rank < n; ++rank) {
    const std::string head =
        "nccl_client: rank " + std::to_string(rank) + " of " + std::to_string(n) + " on ";
    const size_t at = r.output.find(head);
    ASSERT_NE(at, std::string::npos) << "rank " << rank << " did not finish:\n" << r.output;
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(line.find(std::string(GROVE_NCCL_SHIM_DIR) + "/libnccl.so.2"), std::string::npos)
        << "the client did not run on grove's library: " << line;
    EXPECT_NE(line.find("(NCCL 22809)"), std::string::npos) << line;
    EXPECT_NE(line.find(" 0 failed"), std::string::npos) << line;
  }
}

TEST(NcclShim, ClientTwoRanksShm) { expectClientPasses(2, "shm"); }
TEST(NcclShim, ClientThreeRanksSocket) { expectClientPasses(3, "socket"); }
TEST(NcclShim, ClientFourRanksShm) { expectClientPasses(4, "shm"); }

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
