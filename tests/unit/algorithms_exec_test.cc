// End to end: the programs of every rank run on threads over the loopback
// transport with the real host executor and CPU kernels, on real data, for
// every collective x algorithm x data type x reduction op, compared with a
// reference computed here. Input values are chosen so results are exact in
// every type (small integers; products of 1, 2 and -1; avg inputs whose sum
// is a multiple of nranks).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithm_combos.h"
#include "algorithms/builders/builders.h"
#include "algorithms/select/program_cache.h"
#include "algorithms/select/selector.h"
#include "base/dtype.h"
#include "exec_check.h"
#include "ir/validate.h"
#include "unit/harness/thread_ranks.h"
#include "unit/link_presets.h"

namespace grove::plan {
namespace {

// ------------------------------------------------------------------ one run

using testing::CallRun;
using testing::executeCall;

struct ExecRun {
  Coll coll;
  Algo algo;
  int nranks;
  uint64_t count;
  groveDataType_t dtype;
  groveRedOp_t op;
  bool inPlace;
  int root;
  PlanParams params;
};

void execute(const ExecRun& x) {
  SCOPED_TRACE(std::string(algoName(x.algo)) + " ch=" + std::to_string(x.params.nChannels) +
               " chunk=" + std::to_string(x.params.chunkBytes));
  const size_t linkBytes = (x.params.chunkBytes + 15) / 16 * 16 + 64;
  executeCall(
      CallRun{x.coll, x.nranks, x.count, x.dtype, x.op, x.inPlace, x.root},
      [&](const CollArgs& args) { return build(x.algo, args, x.params); }, linkBytes);
}

// ------------------------------------------------------------------ sweeps

using testing::Combo;

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

class ExecTest : public ::testing::TestWithParam<Combo> {};

TEST_P(ExecTest, AllTypesOpsSizesAndRankCounts) {
  const Combo combo = GetParam();
  const groveDataType_t dtypes[] = {groveInt8,    groveUint8,   groveInt32,   groveUint32,
                                    groveInt64,   groveUint64,  groveFloat16, groveFloat32,
                                    groveFloat64, groveBfloat16};
  std::vector<groveRedOp_t> ops = {groveSum};
  if (reduces(combo.coll)) ops = {groveSum, groveProd, groveMax, groveMin, groveAvg};
  int variant = 0;
  for (groveDataType_t dt : dtypes) {
    for (groveRedOp_t op : ops) {
      for (int n : {2, 3, 5}) {
        for (uint64_t count : {uint64_t{1}, uint64_t{37}, uint64_t{301}}) {
          ++variant;
          ExecRun x{combo.coll, combo.algo, n, count, dt, op, false, 0, PlanParams{}};
          x.inPlace = variant % 2 == 0;
          x.root = variant % n;
          x.params.nChannels = 1 + variant % 3;
          x.params.chunkBytes = 64;
          execute(x);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(ExecTest, LargerMessagesAndEdgeRankCounts) {
  const Combo combo = GetParam();
  int variant = 0;
  for (int n : {1, 4, 8}) {
    for (uint64_t count : {uint64_t{0}, uint64_t{5000}, uint64_t{65536 + 3}}) {
      for (bool inPlace : {false, true}) {
        // in place too: all-to-all stages the leaving blocks in scratch
        // 8 threads on a 2-core machine make every ring hop cost a scheduler
        // slice: keep the largest messages to 4 ranks so the binary stays fast.
        if (n == 8 && count > 10000) continue;
        ++variant;
        ExecRun x{combo.coll, combo.algo, n,           count,       groveFloat32,
                  groveSum,   inPlace,    variant % n, PlanParams{}};
        x.params.nChannels = 1 + variant % 3;
        x.params.chunkBytes = count > 10000 ? 16384 : 1024;
        execute(x);
        if (HasFatalFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, ExecTest, ::testing::ValuesIn(testing::kCombos), testing::comboName);

// Random floats: every rank must end with bitwise the same result.
TEST(ExecAllReduce, BitwiseIdenticalOnEveryRank) {
  for (Algo algo : {Algo::kRing, Algo::kDirect, Algo::kDoubling, Algo::kHalving}) {
    for (groveDataType_t dt : {groveFloat32, groveFloat16, groveBfloat16}) {
      SCOPED_TRACE(algoName(algo));
      PlanParams p;
      p.chunkBytes = 256;
      p.nChannels = 2;
      testing::expectBitwiseIdenticalAllReduce(
          5, dt, [&](const CollArgs& a) { return build(algo, a, p); });
    }
  }
}

// Halving-doubling with several extra ranks to fold in (6: P 4 + 2, 7: P 4 + 3)
// and counts smaller than the block count, every op, in and out of place.
TEST(ExecHalving, FoldsInExtraRanksAndSplitsAnyCount) {
  int variant = 0;
  for (int n : {6, 7}) {
    for (uint64_t count : {uint64_t{3}, uint64_t{13}, uint64_t{4099}}) {
      for (groveRedOp_t op : {groveSum, groveProd, groveMax, groveMin, groveAvg}) {
        ++variant;
        ExecRun x{Coll::kAllReduce, Algo::kHalving, n, count, groveFloat32, op, variant % 2 == 0, 0,
                  PlanParams{}};
        x.params.nChannels = 1 + variant % 3;
        x.params.chunkBytes = 256;
        execute(x);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// A send/recv group with a ring exchange plus self copies, over the executor.
TEST(ExecP2P, GroupExchange) {
  const int n = 4;
  const uint64_t bytes = 10000;
  std::vector<std::vector<std::vector<uint8_t>>> extra(n);
  std::vector<Program> progs;
  std::vector<exec::Buffers> bufs(n);
  for (int r = 0; r < n; ++r) {
    // extra[0]: to r+1, extra[1]: from r-1, extra[2]: to r-1, extra[3]: from r+1, extra[4..5]: self
    extra[r].assign(6, std::vector<uint8_t>(bytes, 0));
    for (int k : {0, 2, 4})
      std::fill(extra[r][k].begin(), extra[r][k].end(), static_cast<uint8_t>(r * 10 + k));
    auto buf = [](uint32_t i) { return BufRef{Buf::kExtra, i, 0}; };
    std::vector<P2POp> ops = {{true, (r + 1) % n, bytes, buf(0)},
                              {false, (r + n - 1) % n, bytes, buf(1)},
                              {true, (r + n - 1) % n, bytes, buf(2)},
                              {false, (r + 1) % n, bytes, buf(3)},
                              {true, r, bytes, buf(4)},
                              {false, r, bytes, buf(5)}};
    progs.push_back(buildP2P(ops, r, n));
    for (auto& e : extra[r]) bufs[r].extra.push_back(e.data());
  }
  harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{groveUint8, groveSum, n}, 1024);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(extra[r][1][bytes - 1], static_cast<uint8_t>(((r + n - 1) % n) * 10 + 0));
    EXPECT_EQ(extra[r][3][0], static_cast<uint8_t>(((r + 1) % n) * 10 + 2));
    EXPECT_EQ(extra[r][5][77], static_cast<uint8_t>(r * 10 + 4));
  }
}

// The selector and the cache drive a real run.
TEST(ExecSelector, SelectedAndCachedProgramsRun) {
  SelectorConfig cfg;
  cfg.bufferBytes = 8192;
  const int n = 3;
  Selector sel(n, presets::linkTraits("loopback"), cfg);
  ProgramCache cache;
  for (uint64_t count : {uint64_t{100}, uint64_t{100000}}) {
    for (int rep = 0; rep < 2; ++rep) {
      CollArgs base{Coll::kAllReduce, count, groveInt32, groveSum, 0, 0, n, false};
      const Selection s = sel.select(base);
      EXPECT_EQ(s.algo, count == 100 ? Algo::kDirect : Algo::kRing);
      std::vector<Program> progs;
      std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count)),
          out(n, std::vector<int32_t>(count));
      std::vector<std::vector<uint8_t>> scratch(n);
      std::vector<exec::Buffers> bufs(n);
      for (int r = 0; r < n; ++r) {
        base.rank = r;
        progs.push_back(*cache.get(s.algo, base, s.params));
        for (uint64_t i = 0; i < count; ++i) in[r][i] = static_cast<int32_t>(i % 100 + r);
        scratch[r].resize(progs[r].scratchBytes);
        bufs[r] = exec::Buffers{in[r].data(), out[r].data(), scratch[r].data(), {}};
      }
      harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{groveInt32, groveSum, n},
                                    cfg.bufferBytes);
      for (int r = 0; r < n; ++r)
        for (uint64_t i = 0; i < count; i += 97)
          ASSERT_EQ(out[r][i], static_cast<int32_t>(3 * (i % 100) + 3));
    }
  }
  EXPECT_EQ(cache.hits(), 2u * n);
}

}  // namespace
}  // namespace grove::plan
