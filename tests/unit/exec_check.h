// Shared by the end-to-end algorithm tests: typed test values chosen so
// every result is exact in every type (small integers; products of 1, 2 and
// -1; avg inputs whose sum is a multiple of nranks), the expected output of
// each collective, and one call run on thread ranks over the loopback
// transport with the real host executor, every output element checked.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "ir/schedule.h"
#include "ir/validate.h"
#include "kernels/cpu/reduce.h"
#include "unit/harness/thread_ranks.h"

namespace grove::plan::testing {

// ------------------------------------------------------------------ typed elements

inline void setElem(groveDataType_t t, uint8_t* base, uint64_t i, double v) {
  switch (t) {
    case groveInt8: reinterpret_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case groveUint8: base[i] = static_cast<uint8_t>(v); break;
    case groveInt32: reinterpret_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case groveUint32: reinterpret_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v); break;
    case groveInt64: reinterpret_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case groveUint64: reinterpret_cast<uint64_t*>(base)[i] = static_cast<uint64_t>(v); break;
    case groveFloat16:
      reinterpret_cast<uint16_t*>(base)[i] = kernels::floatToHalf(static_cast<float>(v));
      break;
    case groveFloat32: reinterpret_cast<float*>(base)[i] = static_cast<float>(v); break;
    case groveFloat64: reinterpret_cast<double*>(base)[i] = v; break;
    case groveBfloat16:
      reinterpret_cast<uint16_t*>(base)[i] = kernels::floatToBf16(static_cast<float>(v));
      break;
    default: break;
  }
}

inline double getElem(groveDataType_t t, const uint8_t* base, uint64_t i) {
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

inline bool isUnsigned(groveDataType_t t) {
  return t == groveUint8 || t == groveUint32 || t == groveUint64;
}

/// Input element i of rank r (i indexes the rank's whole input buffer).
inline double inputValue(groveDataType_t t, groveRedOp_t op, int r, uint64_t i, int n) {
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

inline double reduceRef(groveDataType_t t, groveRedOp_t op, uint64_t i, int n) {
  double acc = inputValue(t, op, 0, i, n);
  for (int q = 1; q < n; ++q) {
    const double v = inputValue(t, op, q, i, n);
    switch (op) {
      case groveSum:
      case groveAvg: acc += v; break;
      case groveProd: acc *= v; break;
      case groveMax: acc = std::max(acc, v); break;
      case groveMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  return op == groveAvg ? acc / n : acc;
}

// ------------------------------------------------------------------ one call

/// One collective call, as every rank makes it.
struct CallRun {
  Coll coll;
  int nranks;
  uint64_t count;
  groveDataType_t dtype;
  groveRedOp_t op;
  bool inPlace;
  int root;
};

/// Builds one rank's program for a call.
using BuildFn = std::function<Program(const CollArgs&)>;

inline std::string runText(const CallRun& x) {
  return std::string(collName(x.coll)) + " n=" + std::to_string(x.nranks) +
         " count=" + std::to_string(x.count) + " " + dtypeName(x.dtype) + " " + opName(x.op) +
         (x.inPlace ? " inplace" : "") + " root=" + std::to_string(x.root);
}

inline CollArgs argsOf(const CallRun& x, int r) {
  return CollArgs{x.coll, x.count, x.dtype, x.op, x.root, r, x.nranks, x.inPlace};
}

/// One rank's memory, aliased as the C API defines in place.
struct Memory {
  std::vector<uint8_t> a, b;
  uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  std::vector<uint8_t> scratch;
};

/// Lays out rank r's buffers for the call and fills its input.
inline void layout(const CallRun& x, int r, Memory& m) {
  const uint64_t es = dtypeSize(x.dtype), blk = x.count * es, all = blk * x.nranks;
  const BufferSizes sz = bufferSizesFor(argsOf(x, r));
  const bool root = r == x.root;
  if (x.inPlace && (x.coll == Coll::kAllReduce || x.coll == Coll::kBroadcast ||
                    x.coll == Coll::kReduce || x.coll == Coll::kAlltoAll)) {
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
  for (uint64_t i = 0; i < sz.input / es; ++i)
    setElem(x.dtype, m.in, i, inputValue(x.dtype, x.op, r, i, x.nranks));
}

/// Expected output element i of rank r.
inline double expectedAt(const CallRun& x, int r, uint64_t i) {
  const int n = x.nranks;
  const uint64_t c = x.count;
  switch (x.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: return reduceRef(x.dtype, x.op, i, n);
    case Coll::kReduceScatter: return reduceRef(x.dtype, x.op, r * c + i, n);
    case Coll::kBroadcast: return inputValue(x.dtype, x.op, x.root, i, n);
    case Coll::kAllGather:
    case Coll::kGather: return inputValue(x.dtype, x.op, static_cast<int>(i / c), i % c, n);
    case Coll::kScatter: return inputValue(x.dtype, x.op, x.root, r * c + i, n);
    case Coll::kAlltoAll:
      return inputValue(x.dtype, x.op, static_cast<int>(i / c), r * c + i % c, n);
    default: return NAN;
  }
}

/// Runs one call on thread ranks (links of `linkBytes`) and checks every
/// output element of every rank.
inline void executeCall(const CallRun& x, const BuildFn& build, size_t linkBytes) {
  SCOPED_TRACE(runText(x));
  std::vector<Program> progs;
  std::vector<Memory> mem(x.nranks);
  std::vector<exec::Buffers> bufs(x.nranks);
  for (int r = 0; r < x.nranks; ++r) {
    progs.push_back(build(argsOf(x, r)));
    layout(x, r, mem[r]);
    mem[r].scratch.assign(progs[r].scratchBytes, 0);
    bufs[r].input = mem[r].in;
    bufs[r].output = mem[r].out;
    bufs[r].scratch = mem[r].scratch.data();
  }
  const exec::ReduceSpec spec{x.dtype, x.op, x.nranks};
  ASSERT_NO_THROW(harness::runProgramsOnThreads(progs, bufs, spec, linkBytes, 20.0));
  for (int r = 0; r < x.nranks; ++r) {
    const uint64_t outElems = bufferSizesFor(argsOf(x, r)).output / dtypeSize(x.dtype);
    for (uint64_t i = 0; i < outElems; ++i)
      ASSERT_EQ(getElem(x.dtype, mem[r].out, i), expectedAt(x, r, i))
          << "rank " << r << " element " << i;
  }
}

/// An all-reduce (sum) of 999 random values of type `dt` on `n` thread ranks
/// (links of 1 KiB): every rank must end with bitwise the same result.
inline void expectBitwiseIdenticalAllReduce(int n, groveDataType_t dt, const BuildFn& build) {
  const uint64_t count = 999, es = dtypeSize(dt);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * es)), out = in, scratch(n);
  std::vector<Program> progs;
  std::vector<exec::Buffers> bufs(n);
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < count; ++i) setElem(dt, in[r].data(), i, dist(rng));
    progs.push_back(build(CollArgs{Coll::kAllReduce, count, dt, groveSum, 0, r, n, false}));
    scratch[r].resize(progs[r].scratchBytes);
    bufs[r].input = in[r].data();
    bufs[r].output = out[r].data();
    bufs[r].scratch = scratch[r].data();
  }
  harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{dt, groveSum, n}, 1024);
  for (int r = 1; r < n; ++r) EXPECT_EQ(out[r], out[0]) << dtypeName(dt) << " rank " << r;
}

}  // namespace grove::plan::testing
