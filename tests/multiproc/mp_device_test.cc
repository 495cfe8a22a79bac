// CUDA communicators on the emulated device (GROVE_DEVICE_KIND=cuda,
// GROVE_DEVICE_EMULATION=1) in real processes: grove-launch -n N --
// grove_mp_check runs every collective, dtype, op, size, root, in and out of
// place, and send/recv, through the whole device path -- lowering to device
// programs, device rings in host_staged shared memory whose descriptions
// travel over the host links, launches interpreted by the same lane code the
// GPU kernel runs -- and checks every byte. The INFO log must show that the
// device path ran. Host links over shm and over TCP; rings, trees and
// direct algorithms; the persistent-kernel interpreter and stream tapes
// (GROVE_DEVICE_ENGINE=stream, exec/device/stream_tape.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mp_spawn.h"
#include "mp_summary.h"

namespace {

struct DeviceRun {
  int n;
  std::string transport;
  std::string algo;               // GROVE_ALGO ("" = automatic)
  std::vector<std::string> args;  // extra grove_mp_check arguments
  std::string engine = "auto";    // GROVE_DEVICE_ENGINE
};

void runDevice(const DeviceRun& d) {
  const std::string dir = mptest::makeTempDir("device");
  std::vector<std::string> argv = {
      GROVE_LAUNCH_PATH, "-n", std::to_string(d.n), "--timeout", "280", "--", GROVE_MP_CHECK_PATH};
  argv.insert(argv.end(), d.args.begin(), d.args.end());
  const std::vector<std::string> env = {
      "GROVE_DEVICE_KIND=cuda",         "GROVE_DEVICE_EMULATION=1",
      "GROVE_TRANSPORT=" + d.transport, "GROVE_TIMEOUT=30",
      "GROVE_ALGO=" + d.algo,           "GROVE_DEBUG=INFO",
      "GROVE_DEBUG_SUBSYS=INIT,COLL",   "GROVE_DEVICE_ENGINE=" + d.engine};
  const std::string what = "n=" + std::to_string(d.n) + " " + d.transport +
                           (d.algo.empty() ? "" : " GROVE_ALGO=" + d.algo) + " engine " + d.engine;
  const mptest::RunResult r = mptest::runCommand(argv, env, 290, dir + "/out.txt");
  printf("[ %s ] %.1f s\n", what.c_str(), r.seconds);
  mptest::expectCheckRun(r, d.n, what);
  if (::testing::Test::HasFatalFailure()) return;
  const std::string engine = d.engine == "stream" ? "emulated-stream" : "emulated";
  EXPECT_NE(r.output.find("on " + engine + " over host_staged (emulated)"), std::string::npos)
      << "the log never shows a collective on the " << engine << " device: " << what;
  const std::string chosen = d.engine == "stream" ? "stream" : "kernel";
  EXPECT_NE(r.output.find("device engine " + chosen + ": "), std::string::npos)
      << "rank 0 never said which device engine it chose: " << what;
}

TEST(MpDevice, N2Shm) { runDevice({2, "shm", "", {}}); }
TEST(MpDevice, N3Shm) { runDevice({3, "shm", "", {}}); }
TEST(MpDevice, N4Shm) { runDevice({4, "shm", "", {}}); }
TEST(MpDevice, N4Socket) { runDevice({4, "socket", "", {"--quick"}}); }
TEST(MpDevice, N4Trees) {
  runDevice({4, "shm", "tree", {"--filter", "allreduce,broadcast,reduce", "--quick"}});
}
TEST(MpDevice, N8Rings) { runDevice({8, "shm", "ring", {"--quick"}}); }

// Stream tapes (what processes sharing a GPU without MPS run).
TEST(MpDevice, StreamN2Shm) { runDevice({2, "shm", "", {}, "stream"}); }
TEST(MpDevice, StreamN3Shm) { runDevice({3, "shm", "", {}, "stream"}); }
TEST(MpDevice, StreamN4Socket) { runDevice({4, "socket", "", {"--quick"}, "stream"}); }
TEST(MpDevice, StreamN4Trees) {
  runDevice({4, "shm", "tree", {"--filter", "allreduce,broadcast,reduce", "--quick"}, "stream"});
}

}  // namespace
