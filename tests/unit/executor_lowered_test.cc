// The host executor's lowered programs (exec::LoweredProgram): a program run
// again with its lowered form binds the new call's buffers, and a call with
// another data type lowers it again.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/builders/builders.h"
#include "exec/host_executor.h"
#include "unit/harness/thread_ranks.h"

namespace grove {
namespace {

using exec::Buffers;
using exec::ReduceSpec;
using plan::CollArgs;
using plan::Program;

/// Rank r's program: a 3-rank ring all-reduce of `count` elements.
Program ringAllReduce(int r, uint64_t count, groveDataType_t dt, bool inPlace) {
  CollArgs a;
  a.coll = plan::Coll::kAllReduce;
  a.count = count;
  a.dtype = dt;
  a.op = groveSum;
  a.rank = r;
  a.nranks = 3;
  a.inPlace = inPlace;
  plan::PlanParams p;
  p.chunkBytes = 256;
  return plan::buildRingAllReduce(a, p);
}

TEST(LoweredProgram, ReusedWithNewBuffersAndLoweredAgainForAnotherType) {
  const int n = 3;
  const uint64_t count = 1000;
  std::vector<Program> f32, i32;
  for (int r = 0; r < n; ++r) {
    f32.push_back(ringAllReduce(r, count, groveFloat32, /*inPlace=*/false));
    i32.push_back(ringAllReduce(r, count, groveInt32, /*inPlace=*/false));
  }
  harness::ThreadRanksOptions options;
  harness::runOnThreadRanks(n, options, [&](harness::ThreadRank& rank) {
    const int r = rank.rank();
    exec::LoweredProgram lowered;
    rank.establishFor(f32[r]);
    std::vector<uint8_t> scratch(f32[r].scratchBytes + 64);
    // Three calls on one lowered program, each with fresh buffers and values.
    for (int call = 0; call < 3; ++call) {
      std::vector<float> in(count), out(count, -1.0f);
      for (uint64_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * (call + 1) + i % 7);
      Buffers b;
      b.input = in.data();
      b.output = out.data();
      b.scratch = scratch.data();
      exec::runProgram(f32[r], b, ReduceSpec{groveFloat32, groveSum, n}, rank.links(), rank.wait(),
                       &lowered);
      for (uint64_t i = 0; i < count; ++i)
        ASSERT_EQ(out[i], static_cast<float>(6 * (call + 1) + 3 * (i % 7))) << "call " << call;
    }
    // The same lowered object with an int32 program of the same shape: lowered again.
    std::vector<int32_t> in(count), out(count, -1);
    for (uint64_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(r * 1000 + i);
    Buffers b;
    b.input = in.data();
    b.output = out.data();
    b.scratch = scratch.data();
    rank.establishFor(i32[r]);
    exec::LoweredProgram intLowered;
    for (int call = 0; call < 2; ++call) {
      exec::runProgram(i32[r], b, ReduceSpec{groveInt32, groveSum, n}, rank.links(), rank.wait(),
                       &intLowered);
      for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(3000 + 3 * i));
    }
    // Calling the float program with the int32 type through the float lowering re-lowers it.
    exec::runProgram(f32[r], b, ReduceSpec{groveInt32, groveSum, n}, rank.links(), rank.wait(),
                     &lowered);
    for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(3000 + 3 * i));
  });
}

}  // namespace
}  // namespace grove
