// DevicePath's one-rank path (core/device_path.h): a launch whose programs
// are local copies only runs as the engine's copies on the caller's stream
// (cudaMemcpyAsync on a GPU), never as a kernel launch, and an in-place call
// enqueues nothing. Over the emulated engine, with the programs the builders
// make for one rank. The launch counts and host-time sums of stats().
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "algorithms/select/selector.h"
#include "base/wait.h"
#include "core/device_engine.h"
#include "core/device_path.h"

namespace grove::core {
namespace {

std::shared_ptr<const plan::Program> programFor(plan::Coll coll, uint64_t count, bool inPlace) {
  plan::CollArgs a;
  a.coll = coll;
  a.count = count;
  a.inPlace = inPlace;
  return std::make_shared<const plan::Program>(
      plan::build(plan::Algo::kRing, a, plan::PlanParams{}));
}

class OneRankPath : public ::testing::Test {
 protected:
  AbortSignal abort_;
  DevicePath path_{1, makeEmulatedEngine(10.0), nullptr, abort_,
                   [](groveResult_t, const std::string&) {}};
};

TEST_F(OneRankPath, OutOfPlaceCallsAreCopiesNotKernels) {
  const uint64_t n = 1000;
  std::vector<float> in(n), out(n, -1.0f);
  std::iota(in.begin(), in.end(), 1.0f);
  for (plan::Coll coll : {plan::Coll::kAllReduce, plan::Coll::kBroadcast, plan::Coll::kReduce,
                          plan::Coll::kAllGather, plan::Coll::kReduceScatter}) {
    std::fill(out.begin(), out.end(), -1.0f);
    DeviceOp op;
    op.program = programFor(coll, n, false);
    op.input = in.data();
    op.output = out.data();
    path_.launch({op}, nullptr);
    EXPECT_EQ(out, in) << plan::collName(coll);
  }
  EXPECT_EQ(path_.stats().kernelLaunches, 0u);
  EXPECT_EQ(path_.stats().copies, 5u);
  EXPECT_EQ(path_.stats().noOps, 0u);
  // Host time is accounted per launch: copies count as the enqueue.
  EXPECT_EQ(path_.stats().launches, 5u);
  EXPECT_GT(path_.stats().enqueueNs, 0u);
  EXPECT_EQ(path_.stats().prepareNs, 0u);
}

TEST_F(OneRankPath, InPlaceCallsDoNothing) {
  std::vector<float> buf(64, 3.0f);
  DeviceOp op;
  op.program = programFor(plan::Coll::kAllReduce, buf.size(), true);
  op.input = buf.data();
  op.output = buf.data();
  path_.launch({op, op}, nullptr);  // a group of two
  EXPECT_EQ(buf, std::vector<float>(64, 3.0f));
  EXPECT_EQ(path_.stats().kernelLaunches, 0u);
  EXPECT_EQ(path_.stats().copies, 0u);
  EXPECT_EQ(path_.stats().noOps, 2u);
  EXPECT_EQ(path_.stats().launches, 1u);
}

}  // namespace
}  // namespace grove::core
