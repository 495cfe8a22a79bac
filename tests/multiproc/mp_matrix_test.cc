// The multi-process correctness matrix: grove-launch -n N -- grove_mp_check
// for N in {1,2,3,4,8} over the shm and socket transports (GROVE_TRANSPORT),
// plus --async, --nchannels and transport=auto runs.
//
// Coverage: every run below is the FULL matrix of grove_mp_check --
//   collectives: allreduce broadcast reduce allgather reducescatter gather
//     scatter alltoall, and send/recv in groups (ring, pairwise with the
//     unpaired rank sending to itself, all-pairs including self);
//   dtypes: all 10; ops: sum prod max min avg (reducing collectives);
//   sizes: 0, 1, 7, 1021 and "large" = (1 MiB)/elemsize + 3 elements;
//   in place and out of place; every root at the small sizes, roots 0 and
//   n-1 alternating at the large size;
// for N in {1,2,3,4,8} x GROVE_TRANSPORT in {shm, socket}, so every
// collective x dtype x op x size x nranks combination runs on both
// transports. Extra full runs: --async (host streams) at N=4 and N=8 shm,
// --nchannels 3 at N=3 shm, transport auto at N=2, another seed at N=4 shm,
// and a self-test of the checker (injected faults must be caught).
// Measured on 2 busy cores: N=8 takes about 9 s, the others 0.3-5 s, so the
// matrix needs no trimming (grove_mp_check still has --part/--large-part/
// --quick to split or shrink it should the library get slower).
// Each run must exit 0 and print a SUMMARY line with failures=0; on failure
// the FAIL lines of grove_mp_check (collective, dtype, op, count, root,
// in-place, first bad index, got vs expected) are in the assertion message.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mp_spawn.h"
#include "mp_summary.h"

namespace {

using mptest::RunResult;

// Runs grove_mp_check on n ranks with GROVE_TRANSPORT=transport.
void runMatrix(int n, const std::string& transport, std::vector<std::string> args,
               double timeoutSec = 240) {
  std::string dir = mptest::makeTempDir("matrix");
  std::vector<std::string> argv = {GROVE_LAUNCH_PATH,
                                   "-n",
                                   std::to_string(n),
                                   "--tag-output",
                                   "--timeout",
                                   std::to_string(static_cast<int>(timeoutSec)),
                                   "--",
                                   GROVE_MP_CHECK_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = {"GROVE_TRANSPORT=" + transport, "GROVE_TIMEOUT=30"};
  std::string cmd;
  for (auto& a : argv) cmd += a + " ";
  RunResult r = mptest::runCommand(argv, env, timeoutSec + 15, dir + "/out.txt");
  printf("[ %s ] GROVE_TRANSPORT=%s: %.1f s\n", cmd.c_str(), transport.c_str(), r.seconds);
  mptest::expectCheckRun(r, n, cmd + "(limit " + std::to_string(timeoutSec + 15) + " s)");
}

const std::vector<std::string> kFull = {};

TEST(MpMatrix, N1Shm) { runMatrix(1, "shm", kFull); }
TEST(MpMatrix, N1Socket) { runMatrix(1, "socket", kFull); }
TEST(MpMatrix, N2Shm) { runMatrix(2, "shm", kFull); }
TEST(MpMatrix, N2Socket) { runMatrix(2, "socket", kFull); }
TEST(MpMatrix, N3Shm) { runMatrix(3, "shm", kFull); }
TEST(MpMatrix, N3Socket) { runMatrix(3, "socket", kFull); }
TEST(MpMatrix, N4Shm) { runMatrix(4, "shm", kFull); }
TEST(MpMatrix, N4Socket) { runMatrix(4, "socket", kFull); }
TEST(MpMatrix, N8Shm) { runMatrix(8, "shm", kFull); }
TEST(MpMatrix, N8Socket) { runMatrix(8, "socket", kFull); }

TEST(MpMatrix, N4ShmAsync) { runMatrix(4, "shm", {"--async"}); }
TEST(MpMatrix, N8ShmAsync) { runMatrix(8, "shm", {"--async"}); }
TEST(MpMatrix, N3ShmThreeChannels) { runMatrix(3, "shm", {"--nchannels", "3"}); }
TEST(MpMatrix, N2AutoTransport) { runMatrix(2, "auto", kFull); }
TEST(MpMatrix, N4ShmOtherSeed) { runMatrix(4, "shm", {"--seed", "12345"}); }

// The checker itself: faults injected after each call (a flipped result
// bit, a written guard byte, a modified out-of-place sendbuff) must all be
// caught; grove_mp_check exits non-zero if one slips through.
TEST(MpMatrix, CheckerCatchesInjectedFaults) {
  for (const char* kind : {"result", "guard", "send"}) {
    SCOPED_TRACE(kind);
    runMatrix(3, "shm", {"--quick", "--inject-fault", kind});
  }
}

}  // namespace
