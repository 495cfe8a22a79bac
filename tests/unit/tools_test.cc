// Unit tests of the perf harness's pure parts: option parsing, nccl-tests'
// size/count conventions and bandwidth formulas, and the data check (every
// collective x op x type x rank count, simulated in each type's own
// arithmetic in two reduction orders, must match the expected data exactly).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/fp16.h"
#include "perf/common/coll_spec.h"
#include "perf/common/perf_args.h"
#include "perf/common/report.h"
#include "perf/common/verify.h"

namespace grove::perf {
namespace {

ParseStatus parse(std::vector<std::string> words, PerfArgs* args, std::string* error) {
  words.insert(words.begin(), "all_reduce_perf");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return parsePerfArgs(static_cast<int>(words.size()), argv.data(), args, error);
}

TEST(PerfArgs, DefaultsMatchNcclTests) {
  PerfArgs a;
  std::string err;
  ASSERT_EQ(parse({}, &a, &err), ParseStatus::kRun);
  EXPECT_EQ(a.minBytes, 32u << 20);
  EXPECT_EQ(a.maxBytes, 32u << 20);
  EXPECT_EQ(a.stepBytes, 1u << 20);
  EXPECT_EQ(a.stepFactor, 1u);
  EXPECT_EQ(a.iters, 20);
  EXPECT_EQ(a.warmupIters, 5);
  EXPECT_EQ(a.check, 1);
  EXPECT_EQ(a.average, AverageMode::kAvg);
  EXPECT_EQ(a.root, 0);
  ASSERT_EQ(a.ops.size(), 1u);
  EXPECT_EQ(a.ops[0], groveSum);
  ASSERT_EQ(a.types.size(), 1u);
  EXPECT_EQ(a.types[0], groveFloat32);
  EXPECT_EQ(a.blocking, 1);
}

TEST(PerfArgs, EveryFlag) {
  PerfArgs a;
  std::string err;
  ASSERT_EQ(parse({"-b", "8",   "-e", "8M",       "-f", "4", "-n", "7", "-w", "2", "-c", "0",
                   "-o", "max", "-d", "bfloat16", "-r", "3", "-t", "2", "-g", "1", "-z", "0",
                   "-a", "3",   "-m", "4",        "-p", "1", "-T", "9", "-C", "1", "-i", "1K"},
                  &a, &err),
            ParseStatus::kRun)
      << err;
  EXPECT_EQ(a.minBytes, 8u);
  EXPECT_EQ(a.maxBytes, 8u << 20);
  EXPECT_EQ(a.stepFactor, 4u);
  EXPECT_EQ(a.stepBytes, 1024u);
  EXPECT_EQ(a.iters, 7);
  EXPECT_EQ(a.warmupIters, 2);
  EXPECT_EQ(a.check, 0);
  EXPECT_EQ(a.ops, std::vector<groveRedOp_t>{groveMax});
  EXPECT_EQ(a.types, std::vector<groveDataType_t>{groveBfloat16});
  EXPECT_EQ(a.root, 3);
  EXPECT_EQ(a.nThreads, 2);
  EXPECT_EQ(a.blocking, 0);
  EXPECT_EQ(a.average, AverageMode::kMax);
  EXPECT_EQ(a.aggIters, 4);
  EXPECT_EQ(a.parallelInit, 1);
  EXPECT_EQ(a.timeoutSec, 9);
  EXPECT_EQ(a.reportCpuTime, 1);
  ASSERT_EQ(parse({"--minbytes", "1G", "--maxbytes", "2g", "--op", "all", "--datatype", "all",
                   "--root", "all"},
                  &a, &err),
            ParseStatus::kRun);
  EXPECT_EQ(a.minBytes, 1ull << 30);
  EXPECT_EQ(a.ops.size(), 5u);
  EXPECT_EQ(a.types.size(), 10u);
  EXPECT_EQ(a.root, -1);
  EXPECT_EQ(parse({"-h"}, &a, &err), ParseStatus::kHelp);
}

TEST(PerfArgs, Errors) {
  PerfArgs a;
  std::string err;
  EXPECT_EQ(parse({"-b", "8X"}, &a, &err), ParseStatus::kError);
  EXPECT_NE(err.find("minbytes"), std::string::npos);
  EXPECT_EQ(parse({"-b", "16", "-e", "8"}, &a, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-o", "xor"}, &a, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-d", "float128"}, &a, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-n", "abc"}, &a, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-a", "7"}, &a, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-Q"}, &a, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-b"}, &a, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"stray"}, &a, &err), ParseStatus::kError);
}

TEST(PerfArgs, Sizes) {
  PerfArgs a;
  std::string err;
  ASSERT_EQ(parse({"-b", "8", "-e", "8M", "-f", "4"}, &a, &err), ParseStatus::kRun);
  auto s = perfSizes(a);
  ASSERT_EQ(s.size(), 11u);  // 8, 32, ..., 2M, 8M
  EXPECT_EQ(s.front(), 8u);
  EXPECT_EQ(s.back(), 8u << 20);
  ASSERT_EQ(parse({"-b", "100", "-e", "350", "-i", "100"}, &a, &err), ParseStatus::kRun);
  EXPECT_EQ(perfSizes(a), (std::vector<size_t>{100, 200, 300}));
  EXPECT_DOUBLE_EQ(parsePerfSize("1.5K"), 1536.0);
  EXPECT_LT(parsePerfSize("K"), 0);
}

TEST(CollSpec, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busBwFactor(CollKind::kAllReduce, 4), 1.5);
  for (CollKind k : {CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kAlltoAll,
                     CollKind::kGather, CollKind::kScatter})
    EXPECT_DOUBLE_EQ(busBwFactor(k, 4), 0.75);
  for (CollKind k : {CollKind::kBroadcast, CollKind::kReduce, CollKind::kSendRecv})
    EXPECT_DOUBLE_EQ(busBwFactor(k, 8), 1.0);
  double alg = 0, bus = 0;
  collBandwidth(CollKind::kAllReduce, 1000000, 4, 0.001, 4, &alg, &bus);
  EXPECT_DOUBLE_EQ(alg, 4.0);  // 4 MB in 1 ms
  EXPECT_DOUBLE_EQ(bus, 6.0);
  collBandwidth(CollKind::kAllGather, 250000, 4, 0.001, 4, &alg, &bus);  // count is per rank
  EXPECT_DOUBLE_EQ(alg, 4.0);
  EXPECT_DOUBLE_EQ(bus, 3.0);
}

TEST(CollSpec, CountConventions) {
  CollCounts c = collCounts(CollKind::kAllGather, 1000, 4);
  EXPECT_EQ(c.sendCount, 250u);
  EXPECT_EQ(c.recvCount, 1000u);
  EXPECT_EQ(c.paramCount, 250u);
  EXPECT_EQ(c.sendInplaceOffset, 250u);
  c = collCounts(CollKind::kReduceScatter, 1001, 4);
  EXPECT_EQ(c.sendCount, 1000u);
  EXPECT_EQ(c.recvCount, 250u);
  EXPECT_EQ(c.recvInplaceOffset, 250u);
  c = collCounts(CollKind::kAlltoAll, 1000, 4);
  EXPECT_EQ(c.sendCount, 1000u);
  EXPECT_EQ(c.paramCount, 250u);
  c = collCounts(CollKind::kAllReduce, 1000, 4);
  EXPECT_EQ(c.paramCount, 1000u);
  EXPECT_EQ(c.recvCount, 1000u);
  c = collCounts(CollKind::kScatter, 10, 4);
  EXPECT_EQ(c.sendCount, 8u);
  EXPECT_EQ(c.recvCount, 2u);
}

TEST(Report, Layout) {
  EXPECT_EQ(formatTime(12345.6), "  12346");
  EXPECT_EQ(formatTime(123.45), "  123.5");
  EXPECT_EQ(formatTime(1.234), "   1.23");
  EXPECT_EQ(formatRowParams(8, 2, "float", "sum", -1),
            "           8             2     float     sum      -1");
  EXPECT_NE(formatColumnHeader("time").find("#wrong"), std::string::npos);
  EXPECT_EQ(formatSummary(0, 1.5),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5 \n#\n");
  EXPECT_NE(formatResult(5, 1, 2, -1).find("N/A"), std::string::npos);
}

TEST(Verify, HalfAndBf16Conversions) {
  for (int v = -2048; v <= 2048; ++v)
    EXPECT_EQ(fp16::halfBitsToFloat(fp16::floatToHalfBits(static_cast<float>(v))), v);
  for (int v = -256; v <= 256; ++v)
    EXPECT_EQ(fp16::bf16BitsToFloat(fp16::floatToBf16Bits(static_cast<float>(v))), v);
  EXPECT_EQ(fp16::floatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(fp16::floatToHalfBits(65536.0f), 0x7c00);  // overflow -> inf
  EXPECT_EQ(fp16::floatToBf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(fp16::floatToHalfBits(2049.0f), fp16::floatToHalfBits(2048.0f));  // ties to even
}

// ---- simulation of every collective in the element type's own arithmetic ----

double toDouble(groveDataType_t t, const void* p, size_t i) { return elementAsDouble(t, p, i); }

// a[i] = a[i] op b[i], computed as the library does: integers wrap, half and
// bf16 in float rounded once per operation.
void reduceInto(groveDataType_t t, groveRedOp_t op, void* a, const void* b, size_t i) {
  auto combine = [op](auto x, auto y) {
    using T = decltype(x);
    switch (op) {
      case groveProd: return static_cast<T>(x * y);
      case groveMax: return std::max(x, y);
      case groveMin: return std::min(x, y);
      default: return static_cast<T>(x + y);
    }
  };
  char* pa = static_cast<char*>(a) + i * dtypeSize(t);
  const char* pb = static_cast<const char*>(b) + i * dtypeSize(t);
  auto apply = [&](auto zero) {
    using T = decltype(zero);
    T x, y;
    std::memcpy(&x, pa, sizeof(T));
    std::memcpy(&y, pb, sizeof(T));
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      using U = std::make_unsigned_t<T>;
      if (op == groveSum || op == groveAvg || op == groveProd) {
        U r = op == groveProd ? static_cast<U>(static_cast<U>(x) * static_cast<U>(y))
                              : static_cast<U>(static_cast<U>(x) + static_cast<U>(y));
        std::memcpy(pa, &r, sizeof(T));
        return;
      }
    }
    T r = combine(x, y);
    std::memcpy(pa, &r, sizeof(T));
  };
  switch (t) {
    case groveInt8: apply(int8_t{}); break;
    case groveUint8: apply(uint8_t{}); break;
    case groveInt32: apply(int32_t{}); break;
    case groveUint32: apply(uint32_t{}); break;
    case groveInt64: apply(int64_t{}); break;
    case groveUint64: apply(uint64_t{}); break;
    case groveFloat32: apply(float{}); break;
    case groveFloat64: apply(double{}); break;
    case groveFloat16:
    case groveBfloat16: {
      const bool h = t == groveFloat16;
      uint16_t x, y;
      std::memcpy(&x, pa, 2);
      std::memcpy(&y, pb, 2);
      float fx = h ? fp16::halfBitsToFloat(x) : fp16::bf16BitsToFloat(x);
      float fy = h ? fp16::halfBitsToFloat(y) : fp16::bf16BitsToFloat(y);
      float r = combine(fx, fy);
      uint16_t b = h ? fp16::floatToHalfBits(r) : fp16::floatToBf16Bits(r);
      std::memcpy(pa, &b, 2);
      break;
    }
    default: break;
  }
}

// Divides element i by n (avg): integer division, or float division rounded once.
void divideBy(groveDataType_t t, void* a, size_t i, int n) {
  double v = toDouble(t, a, i);
  if (!dtypeIsFloat(t)) {
    storeElement(t, static_cast<double>(static_cast<int64_t>(v) / n), a, i);
  } else if (t == groveFloat64) {
    double d = v / n;
    std::memcpy(static_cast<char*>(a) + i * 8, &d, 8);
  } else {
    float f = static_cast<float>(v) / static_cast<float>(n);
    if (t == groveFloat32) std::memcpy(static_cast<char*>(a) + i * 4, &f, 4);
    uint16_t b = t == groveFloat16 ? fp16::floatToHalfBits(f) : fp16::floatToBf16Bits(f);
    if (t != groveFloat32) std::memcpy(static_cast<char*>(a) + i * 2, &b, 2);
  }
}

struct RankBufs {
  std::vector<char> send, recv, expected;
  const char* in(const CollCounts& c, int r, size_t es, bool inPlace) const {
    return inPlace ? recv.data() + c.sendInplaceOffset * r * es : send.data();
  }
  char* out(const CollCounts& c, int r, size_t es, bool inPlace) {
    return inPlace ? recv.data() + c.recvInplaceOffset * r * es : recv.data();
  }
};

// Reduces element `src` of every rank's input into dst[dstIdx], ranks in the given order.
void reduceAt(const DataSpec& s, const std::vector<std::vector<char>>& ins, size_t src, void* dst,
              size_t dstIdx, bool reverse) {
  const size_t es = dtypeSize(s.type);
  const int n = s.nranks;
  std::vector<char> acc(es);
  int first = reverse ? n - 1 : 0;
  std::memcpy(acc.data(), ins[first].data() + src * es, es);
  for (int k = 1; k < n; ++k) {
    int r = reverse ? n - 1 - k : k;
    std::vector<char> one(ins[r].begin() + src * es, ins[r].begin() + (src + 1) * es);
    reduceInto(s.type, s.op, acc.data(), one.data(), 0);
  }
  if (s.op == groveAvg) divideBy(s.type, acc.data(), 0, n);
  std::memcpy(static_cast<char*>(dst) + dstIdx * es, acc.data(), es);
}

size_t simulateAndCount(const DataSpec& s, size_t count, bool inPlace, bool reverse) {
  const size_t es = dtypeSize(s.type);
  const int n = s.nranks;
  const CollCounts c = collCounts(s.kind, count, n);
  const size_t bytes = (count + 64) * es;
  std::vector<RankBufs> b(n);
  for (int r = 0; r < n; ++r) {
    b[r].send.assign(bytes, 0x5a);
    b[r].recv.assign(bytes, 0x5a);
    b[r].expected.assign(bytes, 0);
    prepareData(s, r, c, inPlace, b[r].send.data(), b[r].recv.data(), b[r].expected.data());
    // A device run copies only preparedRecvBytes of recv: the rest must not matter.
    const size_t prepared = preparedRecvBytes(s, r, c, inPlace);
    if (prepared > bytes)
      ADD_FAILURE() << "preparedRecvBytes " << prepared << " > " << bytes;
    else
      std::fill(b[r].recv.begin() + static_cast<ptrdiff_t>(prepared), b[r].recv.end(), 0x77);
  }
  std::vector<std::vector<char>> ins(n);  // snapshot: outputs may alias inputs
  for (int r = 0; r < n; ++r) {
    const char* p = b[r].in(c, r, es, inPlace);
    ins[r].assign(p, p + c.sendCount * es);
  }
  const size_t per = c.paramCount;
  for (int r = 0; r < n; ++r) {
    char* out = b[r].out(c, r, es, inPlace);
    auto copyFrom = [&](int src, size_t srcIdx, size_t dstIdx, size_t len) {
      std::memcpy(out + dstIdx * es, ins[src].data() + srcIdx * es, len * es);
    };
    switch (s.kind) {
      case CollKind::kAllReduce:
        for (size_t i = 0; i < per; ++i) reduceAt(s, ins, i, out, i, reverse);
        break;
      case CollKind::kReduce:
        if (r == s.root)
          for (size_t i = 0; i < per; ++i) reduceAt(s, ins, i, out, i, reverse);
        break;
      case CollKind::kReduceScatter:
        for (size_t i = 0; i < per; ++i) reduceAt(s, ins, r * per + i, out, i, reverse);
        break;
      case CollKind::kBroadcast: copyFrom(s.root, 0, 0, per); break;
      case CollKind::kGather:
      case CollKind::kAllGather:
        if (s.kind == CollKind::kGather && r != s.root) break;
        for (int j = 0; j < n; ++j) copyFrom(j, 0, j * per, per);
        break;
      case CollKind::kScatter: copyFrom(s.root, r * per, 0, per); break;
      case CollKind::kAlltoAll:
        for (int j = 0; j < n; ++j) copyFrom(j, r * per, j * per, per);
        break;
      case CollKind::kSendRecv: copyFrom((r - 1 + n) % n, 0, 0, per); break;
    }
  }
  size_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    size_t off = checkedRegionOffset(s, r, c, inPlace);
    wrong += countWrong(s.type, b[r].recv.data() + off, b[r].expected.data(), c.recvCount);
  }
  return wrong;
}

TEST(Verify, ExpectedDataIsExactForEveryCollectiveOpTypeAndRankCount) {
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kAllGather,     CollKind::kBroadcast,
                            CollKind::kReduce,    CollKind::kReduceScatter, CollKind::kGather,
                            CollKind::kScatter,   CollKind::kAlltoAll,      CollKind::kSendRecv};
  for (CollKind kind : kinds)
    for (int n : {1, 2, 3, 4, 7, 8, 16, 40}) {
      const size_t count = 12 * static_cast<size_t>(n) + 5;
      for (int t = 0; t < groveNumTypes; ++t)
        for (int op = 0; op < (collHasOp(kind) ? groveNumOps : 1); ++op)
          for (int root : collHasRoot(kind) ? std::vector<int>{0, n - 1} : std::vector<int>{0})
            for (bool inPlace : {false, true}) {
              if (inPlace && !collHasInPlace(kind)) continue;
              DataSpec s{kind, static_cast<groveRedOp_t>(op), static_cast<groveDataType_t>(t), root,
                         n};
              for (bool reverse : {false, true})
                ASSERT_EQ(simulateAndCount(s, count, inPlace, reverse), 0u)
                    << collName(kind) << " n=" << n << " " << dtypeName(s.type) << " "
                    << opName(s.op) << " root=" << root << " inPlace=" << inPlace
                    << " reverse=" << reverse;
            }
    }
}

TEST(Verify, WrongDataIsCaught) {
  DataSpec s{CollKind::kAllReduce, groveSum, groveFloat32, 0, 4};
  const CollCounts c = collCounts(s.kind, 64, 4);
  std::vector<char> send(64 * 4), recv(64 * 4), expected(64 * 4);
  prepareData(s, 1, c, false, send.data(), recv.data(), expected.data());
  // Untouched receive buffer: every element whose reduction is non-zero is wrong.
  size_t nonZero = 0;
  for (size_t i = 0; i < 64; ++i) nonZero += reducedValue(s, i) != 0;
  EXPECT_EQ(countWrong(s.type, recv.data(), expected.data(), 64), nonZero);
  EXPECT_GT(nonZero, 0u);
  // Inputs differ between ranks and the pieces of an all-to-all name their source.
  DataSpec a{CollKind::kAlltoAll, groveSum, groveInt32, 0, 4};
  EXPECT_NE(inputValue(a, 0, 5), inputValue(a, 1, 5));
  EXPECT_NE(inputValue(a, 0, 5), inputValue(a, 0, 6));
}

TEST(Verify, AvgAndProdAreExactlyRepresentable) {
  for (int n : {1, 3, 5, 8, 24, 48}) {
    DataSpec avg{CollKind::kAllReduce, groveAvg, groveBfloat16, 0, n};
    DataSpec prod{CollKind::kAllReduce, groveProd, groveInt8, 0, n};
    for (size_t i = 0; i < 100; ++i) {
      int64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += inputValue(avg, r, i);
      EXPECT_EQ(sum % n, 0) << n;
      EXPECT_LE(std::abs(reducedValue(prod, i)), 64) << n;
    }
  }
}

}  // namespace
}  // namespace grove::perf
