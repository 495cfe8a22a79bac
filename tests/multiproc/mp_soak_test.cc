// Soak: 10^5 small collectives on 2 ranks (threads of this process) over
// shared memory and over sockets keep resident memory and open descriptors
// flat. GROVE_SOAK_CALLS changes the number of calls.
#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "mp_api_util.h"
#include "mp_spawn.h"

using mpapi::Comms;
using mpapi::onRanks;
using mpapi::openFds;
using mpapi::rssKiB;

namespace {

class Soak : public ::testing::TestWithParam<const char*> {};

TEST_P(Soak, SmallCollectivesKeepMemoryAndDescriptorsFlat) {
  const char* calls = getenv("GROVE_SOAK_CALLS");
  const long total = calls != nullptr ? atol(calls) : 100000;
  setenv("GROVE_TRANSPORT", GetParam(), 1);
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  long rssWarm = 0;
  int fdsWarm = 0;
  const long warmup = total / 10;
  const double start = mptest::now();
  onRanks(2, [&](int r) {
    std::vector<float> in(8, static_cast<float>(r + 1)), out(8);
    std::vector<float> big(16384, 1.f);  // every 1,000th call: a program, not an eager call
    for (long i = 0; i < total; ++i) {
      groveResult_t res;
      if (i % 1000 == 999)
        res = groveAllReduce(big.data(), big.data(), big.size(), groveFloat32, groveMax, comms[r],
                             nullptr);
      else if (i % 3 == 0)
        res = groveBroadcast(in.data(), out.data(), 8, groveFloat32, static_cast<int>(i % 2),
                             comms[r], nullptr);
      else
        res = groveAllReduce(in.data(), out.data(), 8, groveFloat32, groveSum, comms[r], nullptr);
      ASSERT_EQ(res, groveSuccess) << "call " << i << ": " << groveGetLastError(comms[r]);
      if (i % 3 != 0 && i % 1000 != 999) {
        ASSERT_EQ(out[7], 3.f) << "call " << i;
      }
      if (r == 0 && i == warmup) {
        rssWarm = rssKiB();
        fdsWarm = openFds();
      }
    }
  });
  const double seconds = mptest::now() - start;
  const long rssEnd = rssKiB();
  const int fdsEnd = openFds();
  printf("soak over %s: %ld calls in %.1f s (%.1f us each); RSS %ld -> %ld KiB, fds %d -> %d\n",
         GetParam(), total, seconds, seconds * 1e6 / static_cast<double>(total), rssWarm, rssEnd,
         fdsWarm, fdsEnd);
  EXPECT_LE(rssEnd - rssWarm, 1024) << "resident memory grew by more than 1 MiB";
  EXPECT_EQ(fdsEnd, fdsWarm) << "open descriptors changed";
  unsetenv("GROVE_TRANSPORT");
}

INSTANTIATE_TEST_SUITE_P(Transports, Soak, ::testing::Values("shm", "socket"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
