// End to end: tree broadcast / reduce / all-reduce, rings in any order
// (all-reduce, all-gather, reduce-scatter) and the hierarchical all-reduce,
// built for hand-made trees, rings and plans, run on threads over the
// loopback transport with the real host executor and CPU kernels, for every
// data type and reduction op, compared with a reference computed here
// (inputs chosen so every result is exact).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/topo_plan.h"
#include "algorithms/validate.h"
#include "base/dtype.h"
#include "kernels/cpu/reduce.h"
#include "tree_check.h"
#include "unit/harness/thread_ranks.h"

namespace grove::plan {
namespace {

using testing::binaryTree;
using testing::chainTree;
using testing::randomRing;
using testing::randomTree;
using testing::starTree;

// ------------------------------------------------------------------ typed elements

void setElem(groveDataType_t t, uint8_t* base, uint64_t i, double v) {
  switch (t) {
    case groveInt8: reinterpret_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case groveUint8: base[i] = static_cast<uint8_t>(v); break;
    case groveInt32: reinterpret_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case groveUint32: reinterpret_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v); break;
    case groveInt64: reinterpret_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case groveUint64: reinterpret_cast<uint64_t*>(base)[i] = static_cast<uint64_t>(v); break;
    case groveFloat16: reinterpret_cast<uint16_t*>(base)[i] = kernels::floatToHalf(static_cast<float>(v)); break;
    case groveFloat32: reinterpret_cast<float*>(base)[i] = static_cast<float>(v); break;
    case groveFloat64: reinterpret_cast<double*>(base)[i] = v; break;
    case groveBfloat16: reinterpret_cast<uint16_t*>(base)[i] = kernels::floatToBf16(static_cast<float>(v)); break;
    default: break;
  }
}

double getElem(groveDataType_t t, const uint8_t* base, uint64_t i) {
  switch (t) {
    case groveInt8: return reinterpret_cast<const int8_t*>(base)[i];
    case groveUint8: return base[i];
    case groveInt32: return reinterpret_cast<const int32_t*>(base)[i];
    case groveUint32: return reinterpret_cast<const uint32_t*>(base)[i];
    case groveInt64: return static_cast<double>(reinterpret_cast<const int64_t*>(base)[i]);
    case groveUint64: return static_cast<double>(reinterpret_cast<const uint64_t*>(base)[i]);
    case groveFloat16: return kernels::halfToFloat(reinterpret_cast<const uint16_t*>(base)[i]);
    case groveFloat32: return reinterpret_cast<const float*>(base)[i];
    case groveFloat64: return reinterpret_cast<const double*>(base)[i];
    case groveBfloat16: return kernels::bf16ToFloat(reinterpret_cast<const uint16_t*>(base)[i]);
    default: return NAN;
  }
}

bool isUnsigned(groveDataType_t t) {
  return t == groveUint8 || t == groveUint32 || t == groveUint64;
}

/// Input element i of rank r (i indexes the rank's whole input buffer).
double inputValue(groveDataType_t t, groveRedOp_t op, int r, uint64_t i, int n) {
  const bool u = isUnsigned(t);
  auto basic = [&](int q) -> double {
    const uint64_t h = (static_cast<uint64_t>(q) * 7 + i * 3 + i / 5) % 7;  // 0..6
    switch (op) {
      case groveProd: {
        const double vals[] = {1, 2, 1, -1, 1, 1, -1};
        return (u && vals[h] < 0) ? 1 : (q % 2 == 1 && vals[h] == 2 ? 1 : vals[h]);
      }
      default: return u ? static_cast<double>(h % 4) : static_cast<double>(h) - 3;
    }
  };
  if (op != groveAvg || r < n - 1) return basic(r);
  double others = 0;
  for (int q = 0; q < n - 1; ++q) others += basic(q);
  // Make the sum a multiple of n (and the last value non-negative for unsigned types).
  double k = static_cast<double>(static_cast<int64_t>(i % 3) - (u ? 0 : 1));
  if (u) k += std::ceil(others / n);
  return k * n - others;
}

double reduceRef(groveDataType_t t, groveRedOp_t op, uint64_t i, int n) {
  double acc = inputValue(t, op, 0, i, n);
  for (int q = 1; q < n; ++q) {
    const double v = inputValue(t, op, q, i, n);
    switch (op) {
      case groveSum: case groveAvg: acc += v; break;
      case groveProd: acc *= v; break;
      case groveMax: acc = std::max(acc, v); break;
      case groveMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  return op == groveAvg ? acc / n : acc;
}

// ------------------------------------------------------------------ one run

using BuildFn = std::function<Program(const CollArgs&)>;

struct CallRun {
  Coll coll;
  int nranks;
  uint64_t count;
  groveDataType_t dtype;
  groveRedOp_t op;
  bool inPlace;
  int root;
};

std::string runText(const CallRun& x) {
  return std::string(collName(x.coll)) + " n=" + std::to_string(x.nranks) + " count=" +
         std::to_string(x.count) + " " + dtypeName(x.dtype) + " " + opName(x.op) +
         (x.inPlace ? " inplace" : "") + " root=" + std::to_string(x.root);
}

CollArgs argsOf(const CallRun& x, int r) {
  return CollArgs{x.coll, x.count, x.dtype, x.op, x.root, r, x.nranks, x.inPlace};
}

double expectedAt(const CallRun& x, int r, uint64_t i) {
  switch (x.coll) {
    case Coll::kAllReduce: case Coll::kReduce: return reduceRef(x.dtype, x.op, i, x.nranks);
    case Coll::kReduceScatter: return reduceRef(x.dtype, x.op, r * x.count + i, x.nranks);
    case Coll::kBroadcast: return inputValue(x.dtype, x.op, x.root, i, x.nranks);
    case Coll::kAllGather:
      return inputValue(x.dtype, x.op, static_cast<int>(i / x.count), i % x.count, x.nranks);
    default: return NAN;
  }
}

/// Runs one call on thread ranks and checks every output element.
void execute(const CallRun& x, const BuildFn& build, size_t linkBytes) {
  SCOPED_TRACE(runText(x));
  const uint64_t es = dtypeSize(x.dtype), blk = x.count * es, all = blk * x.nranks;
  std::vector<Program> progs;
  std::vector<std::vector<uint8_t>> a(x.nranks), b(x.nranks), scratch(x.nranks);
  std::vector<uint8_t*> out(x.nranks);
  std::vector<exec::Buffers> bufs(x.nranks);
  for (int r = 0; r < x.nranks; ++r) {
    progs.push_back(build(argsOf(x, r)));
    const BufferSizes sz = bufferSizesFor(argsOf(x, r));
    uint8_t *in = nullptr;
    if (x.inPlace && x.coll == Coll::kAllGather) {
      a[r].assign(all + 1, 0xCD);
      out[r] = a[r].data();
      in = out[r] + r * blk;
    } else if (x.inPlace && x.coll == Coll::kReduceScatter) {
      a[r].assign(all + 1, 0xCD);
      in = a[r].data();
      out[r] = in + r * blk;
    } else if (x.inPlace) {
      a[r].assign(std::max(sz.input, sz.output) + 1, 0xCD);
      in = out[r] = a[r].data();
    } else {
      a[r].assign(sz.input + 1, 0xCD);
      b[r].assign(sz.output + 1, 0xCD);
      in = a[r].data();
      out[r] = b[r].data();
    }
    for (uint64_t i = 0; i < sz.input / es; ++i) setElem(x.dtype, in, i, inputValue(x.dtype, x.op, r, i, x.nranks));
    scratch[r].assign(progs[r].scratchBytes, 0);
    bufs[r].input = in;
    bufs[r].output = out[r];
    bufs[r].scratch = scratch[r].data();
  }
  ASSERT_NO_THROW(harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{x.dtype, x.op, x.nranks},
                                                linkBytes, 20.0));
  for (int r = 0; r < x.nranks; ++r) {
    const uint64_t outElems = bufferSizesFor(argsOf(x, r)).output / es;
    for (uint64_t i = 0; i < outElems; ++i)
      ASSERT_EQ(getElem(x.dtype, out[r], i), expectedAt(x, r, i)) << "rank " << r << " element " << i;
  }
}

bool reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

/// Every data type and (for reductions) op, small odd counts, in and out of place.
void sweepTypes(Coll coll, int n, int root, const std::function<BuildFn(const PlanParams&)>& make) {
  const groveDataType_t dtypes[] = {groveInt8,   groveUint8,  groveInt32,   groveUint32,
                                    groveInt64,  groveUint64, groveFloat16, groveFloat32,
                                    groveFloat64, groveBfloat16};
  std::vector<groveRedOp_t> ops = {groveSum};
  if (reduces(coll)) ops = {groveSum, groveProd, groveMax, groveMin, groveAvg};
  int variant = 0;
  for (groveDataType_t dt : dtypes)
    for (groveRedOp_t op : ops)
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{37}, uint64_t{301}}) {
        ++variant;
        PlanParams p;
        p.nChannels = 1 + variant % 2;
        p.chunkBytes = 64;
        execute(CallRun{coll, n, count, dt, op, variant % 2 == 0, root}, make(p), 256);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// ------------------------------------------------------------------ trees

/// Several trees rooted at `root` (root >= 0) or with different roots.
std::vector<Tree> someTrees(int n, int root) {
  auto at = [&](int k) { return root >= 0 ? root : k % n; };
  return {binaryTree(n, at(0), 2.0), randomTree(n, at(1), 17u, 1.0), starTree(n, at(2), 0.5)};
}

TEST(TreeExec, BroadcastAllTypes) {
  for (int n : {2, 3, 5}) {
    const std::vector<Tree> trees = someTrees(n, n - 1);
    sweepTypes(Coll::kBroadcast, n, n - 1, [&](const PlanParams& p) {
      return [&trees, p](const CollArgs& a) { return buildTreeBroadcast(a, p, trees); };
    });
    if (HasFatalFailure()) return;
  }
}

TEST(TreeExec, ReduceAllTypesAndOps) {
  for (int n : {2, 4}) {
    const std::vector<Tree> trees = someTrees(n, 1);
    sweepTypes(Coll::kReduce, n, 1, [&](const PlanParams& p) {
      return [&trees, p](const CollArgs& a) { return buildTreeReduce(a, p, trees); };
    });
    if (HasFatalFailure()) return;
  }
}

TEST(TreeExec, AllReduceAllTypesAndOps) {
  for (int n : {2, 3, 5}) {
    const std::vector<Tree> trees = someTrees(n, -1);
    sweepTypes(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
      return [&trees, p](const CollArgs& a) { return buildTreeAllReduce(a, p, trees); };
    });
    if (HasFatalFailure()) return;
  }
}

// Fan-in: stars and a node with six children (one fan-in step of four, then
// one of two with the send up), reduce and all-reduce, every op, half types.
TEST(TreeExec, WideNodesFanInEveryOp) {
  std::vector<int> wide(8, 1);
  wide[0] = -1;
  wide[1] = 0;
  const std::vector<std::vector<Tree>> shapes = {
      {starTree(5, 2)}, {starTree(7, 0)}, {testing::treeOf(0, wide)}, {binaryTree(7, 3)}};
  for (const auto& trees : shapes) {
    const int n = static_cast<int>(trees[0].parent.size()), root = trees[0].root;
    for (groveDataType_t dt : {groveFloat16, groveBfloat16, groveFloat32, groveInt32})
      for (groveRedOp_t op : {groveSum, groveProd, groveMax, groveMin, groveAvg}) {
        PlanParams p;
        p.chunkBytes = 256;
        execute(CallRun{Coll::kReduce, n, 301, dt, op, false, root},
                [&](const CollArgs& a) { return buildTreeReduce(a, p, trees); }, 512);
        execute(CallRun{Coll::kAllReduce, n, 301, dt, op, true, 0},
                [&](const CollArgs& a) { return buildTreeAllReduce(a, p, trees); }, 512);
        if (HasFatalFailure()) return;
      }
  }
}

TEST(TreeExec, LargerMessagesAndEightRanks) {
  for (int n : {1, 4, 8}) {
    const std::vector<Tree> trees = someTrees(n, -1);
    const std::vector<Tree> rooted = someTrees(n, n / 2);
    for (uint64_t count : {uint64_t{5000}, uint64_t{65536 + 3}}) {
      if (n == 8 && count > 10000) continue;  // 8 threads on 2 cores: keep it quick
      PlanParams p;
      p.chunkBytes = count > 10000 ? 16384 : 1024;
      p.nChannels = 2;
      const size_t link = p.chunkBytes + 64;
      execute(CallRun{Coll::kAllReduce, n, count, groveFloat32, groveSum, count > 10000, 0},
              [&](const CollArgs& a) { return buildTreeAllReduce(a, p, trees); }, link);
      execute(CallRun{Coll::kBroadcast, n, count, groveFloat32, groveSum, false, n / 2},
              [&](const CollArgs& a) { return buildTreeBroadcast(a, p, rooted); }, link);
      execute(CallRun{Coll::kReduce, n, count, groveFloat32, groveSum, true, n / 2},
              [&](const CollArgs& a) { return buildTreeReduce(a, p, rooted); }, link);
      if (HasFatalFailure()) return;
    }
  }
}

// Random floats: every rank ends with bitwise the same all-reduce result.
TEST(TreeExec, AllReduceBitwiseIdenticalOnEveryRank) {
  const int n = 5;
  const std::vector<Tree> trees = someTrees(n, -1);
  for (groveDataType_t dt : {groveFloat32, groveFloat16, groveBfloat16}) {
    const uint64_t count = 999, es = dtypeSize(dt);
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * es)), out = in;
    std::vector<Program> progs;
    std::vector<exec::Buffers> bufs(n);
    PlanParams p;
    p.chunkBytes = 256;
    for (int r = 0; r < n; ++r) {
      for (uint64_t i = 0; i < count; ++i) setElem(dt, in[r].data(), i, dist(rng));
      progs.push_back(buildTreeAllReduce(CollArgs{Coll::kAllReduce, count, dt, groveSum, 0, r, n, false}, p, trees));
      bufs[r].input = in[r].data();
      bufs[r].output = out[r].data();
    }
    harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{dt, groveSum, n}, 1024);
    for (int r = 1; r < n; ++r) EXPECT_EQ(out[r], out[0]) << dtypeName(dt) << " rank " << r;
  }
}

// ------------------------------------------------------------------ rings in any order, hier

TEST(OrderedRingExec, AllReduceAllGatherReduceScatter) {
  for (int n : {2, 3, 5}) {
    const std::vector<Ring> rings = {randomRing(n, 3u, 1.0), randomRing(n, 4u, 2.5)};
    sweepTypes(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
      return [&rings, p](const CollArgs& a) { return buildRingsAllReduce(a, p, rings); };
    });
    sweepTypes(Coll::kAllGather, n, 0, [&](const PlanParams& p) {
      return [&rings, p](const CollArgs& a) { return buildRingsAllGather(a, p, rings); };
    });
    sweepTypes(Coll::kReduceScatter, n, 0, [&](const PlanParams& p) {
      return [&rings, p](const CollArgs& a) { return buildRingsReduceScatter(a, p, rings); };
    });
    if (HasFatalFailure()) return;
  }
}

TEST(HierExec, AllReduceAllTypesAndOps) {
  const HierPlan twoByTwo{{{0, 1}, {2, 3}}, {{0, 3}, {1, 2}}, 0};
  const HierPlan uneven{{{0}, {1, 2, 3}, {4}}, {{0, 2, 4}}, 0};
  for (const HierPlan* plan : {&twoByTwo, &uneven}) {
    int n = 0;
    for (const auto& m : plan->machines) n += static_cast<int>(m.size());
    sweepTypes(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
      return [plan, p](const CollArgs& a) { return buildHierAllReduce(a, p, *plan); };
    });
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace grove::plan
