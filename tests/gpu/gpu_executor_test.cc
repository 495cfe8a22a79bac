// GPU tests of the CUDA executor (src/exec/cuda): 2, 3 and 4 ranks in one
// process on the one GPU, each on its own stream, against the host executor
// (gpu_exec_harness.h), plus stream ordering, groups, abort, timeout and a
// closed peer. Without a CUDA device the binary prints "no CUDA device: GPU
// tests skipped" and exits 77 (ctest: Skipped).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/dtype.h"
#include "base/error.h"
#include "exec/cuda/cuda_executor.h"
#include "exec_kernels.h"
#include "gpu_check.h"
#include "gpu_exec_harness.h"
#include "kernels/cuda/cuda_kernels.h"
#include "unit/algorithm_combos.h"

namespace grove::gputest {
namespace {

namespace xc = exec::cuda;
namespace dv = exec::dev;
using plan::Algo;
using plan::Coll;
using plan::testing::Combo;

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

constexpr groveDataType_t kDtypes[] = {groveFloat32, groveFloat16, groveBfloat16, groveInt32,
                                       groveFloat64};
constexpr groveRedOp_t kOps[] = {groveSum, groveProd, groveMax, groveMin, groveAvg};

class GpuExecCollectives : public ::testing::TestWithParam<Combo> {};

// Every dtype x op (reductions) x small size x in place, 2..4 ranks, 4 KiB
// rings (every step wraps), persistent and phased launches alternating.
TEST_P(GpuExecCollectives, SmallSizesEveryDtypeAndOp) {
  const Combo combo = GetParam();
  uint64_t seed = 1;
  for (int n = 2; n <= 4; ++n) {
    for (groveDataType_t dt : kDtypes) {
      for (groveRedOp_t op : kOps) {
        if (!reduces(combo.coll) && op != groveSum) continue;
        for (uint64_t count : {0ull, 1ull, 7ull, 1000ull}) {
          for (bool inPlace : {false, true}) {
            // in place too: all-to-all stages the leaving blocks in scratch
            ExecCase c;
            c.coll = combo.coll;
            c.algo = combo.algo;
            c.nranks = n;
            c.count = count;
            c.dtype = dt;
            c.op = op;
            c.inPlace = inPlace;
            c.root = static_cast<int>(seed % n);
            c.mode = seed % 2 == 0 ? xc::LaunchMode::kPhased : xc::LaunchMode::kAuto;
            const std::string err = runCase(c, seed++);
            ASSERT_TRUE(err.empty()) << caseText(c) << ": " << err;
          }
        }
      }
    }
  }
}

// 65536+3 elements on 4 KiB rings; 4 MiB+5 elements on 256 KiB rings (ring
// algorithms: the direct ones send whole messages per step).
TEST_P(GpuExecCollectives, LargeSizes) {
  const Combo combo = GetParam();
  struct Pick {
    groveDataType_t dt;
    groveRedOp_t op;
  };
  const Pick picks[] = {
      {groveFloat32, groveSum}, {groveBfloat16, groveAvg}, {groveFloat64, groveMax}};
  uint64_t seed = 1000;
  for (int n = 2; n <= 4; ++n) {
    for (const Pick& p : picks) {
      for (uint64_t count : {uint64_t{65536 + 3}, uint64_t{(4u << 20) + 5}}) {
        const bool big = count > 65539;
        if (big && (combo.algo != Algo::kRing || p.dt == groveFloat64)) continue;
        ExecCase c;
        c.coll = combo.coll;
        c.algo = combo.algo;
        c.nranks = n;
        c.count = count;
        c.dtype = p.dt;
        c.op = reduces(combo.coll) ? p.op : groveSum;
        c.inPlace = seed % 2 == 1;
        c.root = n - 1;
        c.params = big ? plan::PlanParams{2, 128 << 10} : plan::PlanParams{2, 2048};
        c.ringBytes = big ? 256 << 10 : 4096;
        const std::string err = runCase(c, seed++);
        ASSERT_TRUE(err.empty()) << caseText(c) << ": " << err;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Combos, GpuExecCollectives, ::testing::ValuesIn(plan::testing::kCombos),
                         plan::testing::comboName);

/// An all-reduce (sum, float32) of `count` prepared on n ranks, inputs from the harness.
std::vector<RankCall> prepareAllReduce(int n, uint64_t count, DeviceRings& rings, uint64_t seed) {
  ExecCase c;
  c.nranks = n;
  c.count = count;
  return prepareCall(c, rings, seed);
}

// Fill (slow) -> all-reduce -> scale, all on the user's stream with no host
// sync in between; then the same with the fill on another stream ordered by
// an event.
TEST(GpuExecStream, CollectiveOrderedBetweenKernelsOnTheUserStream) {
  const int n = 3;
  const uint64_t count = 100003;
  preloadTestKernels();  // else scale's first launch waits behind rank 0's waiting collective
  for (xc::LaunchMode mode : {xc::LaunchMode::kAuto, xc::LaunchMode::kPhased}) {
    for (bool viaEvent : {false, true}) {
      const std::string combo = std::string(mode == xc::LaunchMode::kAuto ? "auto" : "phased") +
                                (viaEvent ? ", fill ordered by an event" : ", fill on the stream");
      DeviceRings rings(8192);
      std::vector<RankCall> calls = prepareAllReduce(n, count, rings, 7);
      std::vector<xc::DeviceBuffer> checks;
      std::vector<std::unique_ptr<RankLaunch>> launches;
      std::vector<std::unique_ptr<xc::Stream>> fillStreams;
      std::vector<std::unique_ptr<xc::Event>> events;
      for (int r = 0; r < n; ++r) {
        launches.push_back(std::make_unique<RankLaunch>());
        fillStreams.push_back(std::make_unique<xc::Stream>());
        events.push_back(std::make_unique<xc::Event>());
        checks.emplace_back(count * sizeof(float));
      }
      for (int r = 0; r < n; ++r) {
        void* user = launches[r]->stream.get();
        void* fillOn = viaEvent ? fillStreams[r]->get() : user;
        auto* in = reinterpret_cast<float*>(calls[r].call.bufs[dv::kSlotInput]);
        launchFillSlow(in, count, static_cast<float>(10 * r), 50'000'000, fillOn);
        if (viaEvent) {
          events[r]->record(fillOn);
          events[r]->waitOn(user);
        }
        launches[r]->ctl.reset(uint64_t{30} * 1000000000ull);
        xc::launchCalls(&calls[r].call, 1, launches[r]->ctl.device(), user,
                        xc::LaunchOptions{launches[r]->ctl.barrier(), mode});
        launchScale(reinterpret_cast<float*>(checks[r].get()),
                    reinterpret_cast<const float*>(calls[r].call.bufs[dv::kSlotOutput]), count,
                    2.0f, user);
      }
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(waitStream(launches[r]->stream.get(), 60.0)) << "rank " << r << ", " << combo;
        ASSERT_EQ(launches[r]->ctl.status(), dv::kDevOk) << "rank " << r << ", " << combo;
        std::vector<float> got(count);
        cudaOk(
            cudaMemcpy(got.data(), checks[r].get(), count * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
        for (uint64_t i = 0; i < count; ++i) {
          const float want = 2.0f * (30.0f + 3.0f * static_cast<float>(i % 97));
          ASSERT_EQ(got[i], want) << "rank " << r << " element " << i << " event " << viaEvent;
        }
      }
    }
  }
}

// Two calls (all-reduce, then all-gather of another type) in one launch per
// rank, over the same rings; and 14 calls, more than one launch carries.
TEST(GpuExecGroup, CallsOfOneLaunchMatchTheHost) {
  for (xc::LaunchMode mode : {xc::LaunchMode::kAuto, xc::LaunchMode::kPhased}) {
    for (int nCalls : {2, 14}) {
      const int n = 3;
      DeviceRings rings(4096);
      std::vector<ExecCase> cases;
      std::vector<std::vector<RankCall>> prepared;
      for (int k = 0; k < nCalls; ++k) {
        ExecCase c;
        c.nranks = n;
        c.coll = k % 2 == 0 ? Coll::kAllReduce : Coll::kAllGather;
        c.algo = k % 4 == 3 ? Algo::kDirect : Algo::kRing;
        c.dtype = k % 2 == 0 ? groveFloat32 : groveBfloat16;
        c.count = 3001 + 17 * k;
        cases.push_back(c);
        prepared.push_back(prepareCall(c, rings, 50 + k));
        runHostReference(c, prepared.back());
      }
      std::vector<std::vector<dv::DevCall>> perRank(n);
      for (int r = 0; r < n; ++r)
        for (int k = 0; k < nCalls; ++k) perRank[r].push_back(prepared[k][r].call);
      std::vector<std::unique_ptr<RankLaunch>> launches;
      const std::string failed = launchAndWait(perRank, launches, mode);
      ASSERT_TRUE(failed.empty()) << failed;
      for (int k = 0; k < nCalls; ++k) {
        const std::string err = compareWithHost(cases[k], prepared[k]);
        EXPECT_TRUE(err.empty()) << "call " << k << " of " << nCalls << ": " << caseText(cases[k])
                                 << ": " << err;
      }
    }
  }
}

/// Rank 0 of a 2-rank all-reduce, launched alone (its peer never comes).
struct LoneRank {
  DeviceRings rings{4096};
  std::vector<RankCall> calls = prepareAllReduce(2, 1 << 20, rings, 9);
  RankLaunch launch;

  void start(uint64_t timeoutNs, xc::LaunchMode mode) {
    launch.ctl.reset(timeoutNs);
    xc::launchCalls(&calls[0].call, 1, launch.ctl.device(), launch.stream.get(),
                    xc::LaunchOptions{launch.ctl.barrier(), mode});
  }
};

TEST(GpuExecAbort, AbortFlagStopsAWaitingLaunch) {
  for (xc::LaunchMode mode : {xc::LaunchMode::kAuto, xc::LaunchMode::kPhased}) {
    LoneRank lone;
    lone.start(0, mode);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(xc::streamDone(lone.launch.stream.get())) << "returned without its peer";
    const auto t0 = std::chrono::steady_clock::now();
    lone.launch.ctl.abort();
    ASSERT_TRUE(waitStream(lone.launch.stream.get(), 10.0)) << "the launch ignored the abort flag";
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(lone.launch.ctl.status(), dv::kDevAborted);
    EXPECT_LT(sec, 5.0);
  }
}

TEST(GpuExecAbort, TimeoutEndsAWaitingLaunch) {
  for (xc::LaunchMode mode : {xc::LaunchMode::kAuto, xc::LaunchMode::kPhased}) {
    LoneRank lone;
    lone.start(200'000'000, mode);  // 200 ms
    ASSERT_TRUE(waitStream(lone.launch.stream.get(), 10.0)) << "the wait never timed out";
    EXPECT_EQ(lone.launch.ctl.status(), dv::kDevTimedOut);
    EXPECT_EQ(lone.launch.ctl.host()->failedCall, 0u);
  }
}

TEST(GpuExecAbort, ClosedPeerEndsAWaitingLaunch) {
  LoneRank lone;
  lone.start(0, xc::LaunchMode::kAuto);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Rank 0's first ring step of the ring all-reduce sends to rank 1 and
  // receives from rank 1 (2 ranks): close both directions.
  lone.rings.close(1, 0);
  lone.rings.close(0, 1);
  const bool done = waitStream(lone.launch.stream.get(), 10.0);
  if (!done) lone.launch.ctl.abort();
  ASSERT_TRUE(done || waitStream(lone.launch.stream.get(), 10.0));
  EXPECT_TRUE(done) << "a closed ring did not end the wait";
  EXPECT_EQ(lone.launch.ctl.status(), dv::kDevPeerClosed);
}

TEST(GpuExecApi, HelpersOnADevice) {
  xc::DeviceBuffer buf(64);
  int hostWord = 0;
  EXPECT_TRUE(xc::isDevicePointer(buf.get()));
  EXPECT_FALSE(xc::isDevicePointer(&hostWord));
  EXPECT_GE(xc::currentDevice(), 0);
  EXPECT_GT(xc::residentBlocks(), 0u);
  xc::MappedControl ctl;
  EXPECT_THROW(xc::launchCalls(nullptr, 1, ctl.device(), nullptr), Error);
  const std::vector<unsigned char> zero(64, 0);
  std::vector<unsigned char> got(64, 1);
  cudaOk(cudaMemcpy(got.data(), buf.get(), 64, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(got, zero) << "DeviceBuffer is not zeroed";
}

}  // namespace
}  // namespace grove::gputest
