// End to end: the programs of every rank run on threads over the loopback
// transport with the real host executor and CPU kernels, on real data, for
// every collective x algorithm x data type x reduction op, compared with a
// reference computed here. Input values are chosen so results are exact in
// every type (small integers; products of 1, 2 and -1; avg inputs whose sum
// is a multiple of nranks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "algorithm_combos.h"
#include "algorithms/builders.h"
#include "algorithms/program_cache.h"
#include "algorithms/selector.h"
#include "algorithms/validate.h"
#include "base/dtype.h"
#include "kernels/cpu/reduce.h"
#include "unit/harness/thread_ranks.h"

namespace grove::plan {
namespace {

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

std::string runText(const ExecRun& x) {
  return std::string(collName(x.coll)) + "/" + algoName(x.algo) + " n=" + std::to_string(x.nranks) +
         " count=" + std::to_string(x.count) + " " + dtypeName(x.dtype) + " " + opName(x.op) +
         (x.inPlace ? " inplace" : "") + " root=" + std::to_string(x.root) +
         " ch=" + std::to_string(x.params.nChannels) + " chunk=" + std::to_string(x.params.chunkBytes);
}

CollArgs argsOf(const ExecRun& x, int r) {
  return CollArgs{x.coll, x.count, x.dtype, x.op, x.root, r, x.nranks, x.inPlace};
}

/// One rank's memory, aliased as the C API defines in place.
struct Memory {
  std::vector<uint8_t> a, b;
  uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  std::vector<uint8_t> scratch;
};

void layout(const ExecRun& x, int r, Memory& m) {
  const uint64_t es = dtypeSize(x.dtype), blk = x.count * es, all = blk * x.nranks;
  const BufferSizes sz = bufferSizesFor(argsOf(x, r));
  const bool root = r == x.root;
  if (x.inPlace && (x.coll == Coll::kAllReduce || x.coll == Coll::kBroadcast || x.coll == Coll::kReduce)) {
    m.a.assign(std::max(sz.input, sz.output) + 1, 0xCD);
    m.in = m.out = m.a.data();
  } else if (x.inPlace && (x.coll == Coll::kAllGather || (x.coll == Coll::kGather && root))) {
    m.a.assign(all + 1, 0xCD);
    m.out = m.a.data();
    m.in = m.out + r * blk;
  } else if (x.inPlace && (x.coll == Coll::kReduceScatter || (x.coll == Coll::kScatter && root))) {
    m.a.assign(all + 1, 0xCD);
    m.in = m.a.data();
    m.out = m.in + r * blk;
  } else {
    m.a.assign(sz.input + 1, 0xCD);
    m.b.assign(sz.output + 1, 0xCD);
    m.in = m.a.data();
    m.out = m.b.data();
  }
  for (uint64_t i = 0; i < sz.input / es; ++i) setElem(x.dtype, m.in, i, inputValue(x.dtype, x.op, r, i, x.nranks));
}

double expectedAt(const ExecRun& x, int r, uint64_t i) {
  const int n = x.nranks;
  const uint64_t c = x.count;
  switch (x.coll) {
    case Coll::kAllReduce: case Coll::kReduce: return reduceRef(x.dtype, x.op, i, n);
    case Coll::kReduceScatter: return reduceRef(x.dtype, x.op, r * c + i, n);
    case Coll::kBroadcast: return inputValue(x.dtype, x.op, x.root, i, n);
    case Coll::kAllGather: case Coll::kGather:
      return inputValue(x.dtype, x.op, static_cast<int>(i / c), i % c, n);
    case Coll::kScatter: return inputValue(x.dtype, x.op, x.root, r * c + i, n);
    case Coll::kAlltoAll: return inputValue(x.dtype, x.op, static_cast<int>(i / c), r * c + i % c, n);
    default: return NAN;
  }
}

void execute(const ExecRun& x) {
  SCOPED_TRACE(runText(x));
  std::vector<Program> progs;
  std::vector<Memory> mem(x.nranks);
  std::vector<exec::Buffers> bufs(x.nranks);
  for (int r = 0; r < x.nranks; ++r) {
    progs.push_back(build(x.algo, argsOf(x, r), x.params));
    layout(x, r, mem[r]);
    mem[r].scratch.assign(progs[r].scratchBytes, 0);
    bufs[r].input = mem[r].in;
    bufs[r].output = mem[r].out;
    bufs[r].scratch = mem[r].scratch.data();
  }
  const exec::ReduceSpec spec{x.dtype, x.op, x.nranks};
  const size_t linkBytes = (x.params.chunkBytes + 15) / 16 * 16 + 64;
  ASSERT_NO_THROW(harness::runProgramsOnThreads(progs, bufs, spec, linkBytes, 20.0));
  for (int r = 0; r < x.nranks; ++r) {
    const uint64_t outElems = bufferSizesFor(argsOf(x, r)).output / dtypeSize(x.dtype);
    for (uint64_t i = 0; i < outElems; ++i)
      ASSERT_EQ(getElem(x.dtype, mem[r].out, i), expectedAt(x, r, i)) << "rank " << r << " element " << i;
  }
}

// ------------------------------------------------------------------ sweeps

using testing::Combo;

bool reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

class ExecTest : public ::testing::TestWithParam<Combo> {};

TEST_P(ExecTest, AllTypesOpsSizesAndRankCounts) {
  const Combo combo = GetParam();
  const groveDataType_t dtypes[] = {groveInt8,   groveUint8,  groveInt32,   groveUint32,
                                    groveInt64,  groveUint64, groveFloat16, groveFloat32,
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
          x.inPlace = combo.coll != Coll::kAlltoAll && variant % 2 == 0;
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
        if (inPlace && combo.coll == Coll::kAlltoAll) continue;
        // 8 threads on a 2-core machine make every ring hop cost a scheduler
        // slice: keep the largest messages to 4 ranks so the binary stays fast.
        if (n == 8 && count > 10000) continue;
        ++variant;
        ExecRun x{combo.coll, combo.algo, n, count, groveFloat32, groveSum, inPlace, variant % n, PlanParams{}};
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
  for (Algo algo : {Algo::kRing, Algo::kDirect}) {
    for (groveDataType_t dt : {groveFloat32, groveFloat16, groveBfloat16}) {
      const int n = 5;
      const uint64_t count = 999, es = dtypeSize(dt);
      std::mt19937 rng(7);
      std::uniform_real_distribution<double> dist(-1.0, 1.0);
      std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * es));
      std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(count * es));
      std::vector<Program> progs;
      std::vector<std::vector<uint8_t>> scratch(n);
      std::vector<exec::Buffers> bufs(n);
      PlanParams p;
      p.chunkBytes = 256;
      p.nChannels = 2;
      for (int r = 0; r < n; ++r) {
        for (uint64_t i = 0; i < count; ++i) setElem(dt, in[r].data(), i, dist(rng));
        progs.push_back(build(algo, CollArgs{Coll::kAllReduce, count, dt, groveSum, 0, r, n, false}, p));
        scratch[r].resize(progs[r].scratchBytes);
        bufs[r].input = in[r].data();
        bufs[r].output = out[r].data();
        bufs[r].scratch = scratch[r].data();
      }
      harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{dt, groveSum, n}, 1024);
      for (int r = 1; r < n; ++r) EXPECT_EQ(out[r], out[0]) << algoName(algo) << " " << dtypeName(dt) << " rank " << r;
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
    for (int k : {0, 2, 4}) std::fill(extra[r][k].begin(), extra[r][k].end(), static_cast<uint8_t>(r * 10 + k));
    auto buf = [](uint32_t i) { return BufRef{Buf::kExtra, i, 0}; };
    std::vector<P2POp> ops = {{true, (r + 1) % n, bytes, buf(0)}, {false, (r + n - 1) % n, bytes, buf(1)},
                              {true, (r + n - 1) % n, bytes, buf(2)}, {false, (r + 1) % n, bytes, buf(3)},
                              {true, r, bytes, buf(4)}, {false, r, bytes, buf(5)}};
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
  Selector sel(n, TransportKind::kLoopback, cfg);
  ProgramCache cache;
  for (uint64_t count : {uint64_t{100}, uint64_t{100000}}) {
    for (int rep = 0; rep < 2; ++rep) {
      CollArgs base{Coll::kAllReduce, count, groveInt32, groveSum, 0, 0, n, false};
      const Selection s = sel.select(base);
      EXPECT_EQ(s.algo, count == 100 ? Algo::kDirect : Algo::kRing);
      std::vector<Program> progs;
      std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count)), out(n, std::vector<int32_t>(count));
      std::vector<std::vector<uint8_t>> scratch(n);
      std::vector<exec::Buffers> bufs(n);
      for (int r = 0; r < n; ++r) {
        base.rank = r;
        progs.push_back(*cache.get(s.algo, base, s.params));
        for (uint64_t i = 0; i < count; ++i) in[r][i] = static_cast<int32_t>(i % 100 + r);
        scratch[r].resize(progs[r].scratchBytes);
        bufs[r] = exec::Buffers{in[r].data(), out[r].data(), scratch[r].data(), {}};
      }
      harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{groveInt32, groveSum, n}, cfg.bufferBytes);
      for (int r = 0; r < n; ++r)
        for (uint64_t i = 0; i < count; i += 97) ASSERT_EQ(out[r][i], static_cast<int32_t>(3 * (i % 100) + 3));
    }
  }
  EXPECT_EQ(cache.hits(), 2u * n);
}

}  // namespace
}  // namespace grove::plan
