// CPU kernels: every dtype x op against a scalar reference written
// independently here (half conversions use the compiler's _Float16, bfloat16
// rounding is decided in double precision), over many sizes, misaligned
// pointers, aliasing, dst2, avg with `final`, and the conversions.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/reduce_loops.h"

namespace grove::kernels {
namespace {

// ------------------------------------------------------------ reference

uint16_t refFloatToHalf(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

float refHalfToFloat(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

float bitsF(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t fBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Nearest bfloat16, ties to even, decided by comparing distances in double.
uint16_t refFloatToBf16(float f) {
  if (std::isnan(f)) return static_cast<uint16_t>((fBits(f) >> 16) | 0x40);
  uint32_t u = fBits(f);
  uint16_t lo = static_cast<uint16_t>(u >> 16);
  if ((u & 0xffff) == 0) return lo;
  uint16_t hi = static_cast<uint16_t>(lo + 1);  // away from zero (same sign)
  double dl = std::fabs(static_cast<double>(f) - static_cast<double>(bitsF(uint32_t(lo) << 16)));
  double dh = std::fabs(static_cast<double>(f) - static_cast<double>(bitsF(uint32_t(hi) << 16)));
  if ((hi & 0x7f80) == 0x7f80) {
    // Rounding up reaches Inf: happens when f is at or past the midpoint to 2^128.
    double maxBf = static_cast<double>(bitsF(uint32_t(lo) << 16));
    double halfUlp = std::ldexp(1.0, 127 - 8);
    return std::fabs(static_cast<double>(f)) >= std::fabs(maxBf) + halfUlp ? hi : lo;
  }
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) == 0 ? lo : hi;
}

template <class T>
T refOp(groveRedOp_t op, bool final, int n, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    T sum = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    switch (op) {
      case groveSum: return sum;
      case groveProd: return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
      case groveMax: return std::max(a, b);
      case groveMin: return std::min(a, b);
      case groveAvg:
        if (!final) return sum;
        if constexpr (std::is_signed_v<T>)
          return static_cast<T>(int64_t(sum) / n);
        else
          return static_cast<T>(uint64_t(sum) / uint64_t(n));
      default: return 0;
    }
  } else {
    if ((op == groveMax || op == groveMin) && (std::isnan(a) || std::isnan(b))) {
      return std::numeric_limits<T>::quiet_NaN();
    }
    switch (op) {
      case groveSum: return a + b;
      case groveProd: return a * b;
      case groveMax: return std::max(a, b);
      case groveMin: return std::min(a, b);
      case groveAvg: return final ? (a + b) / static_cast<T>(n) : a + b;
      default: return 0;
    }
  }
}

// Reference result of one element (bytes in, bytes out).
void refElement(groveDataType_t t, groveRedOp_t op, bool final, int n, const void* a, const void* b,
                void* out) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T x, y;
    std::memcpy(&x, a, sizeof x);
    std::memcpy(&y, b, sizeof y);
    T r = refOp<T>(op, final, n, x, y);
    std::memcpy(out, &r, sizeof r);
  };
  uint16_t ha, hb, hr;
  switch (t) {
    case groveInt8: run(int8_t{}); break;
    case groveUint8: run(uint8_t{}); break;
    case groveInt32: run(int32_t{}); break;
    case groveUint32: run(uint32_t{}); break;
    case groveInt64: run(int64_t{}); break;
    case groveUint64: run(uint64_t{}); break;
    case groveFloat32: run(float{}); break;
    case groveFloat64: run(double{}); break;
    case groveFloat16:
      std::memcpy(&ha, a, 2);
      std::memcpy(&hb, b, 2);
      hr = refFloatToHalf(refOp<float>(op, final, n, refHalfToFloat(ha), refHalfToFloat(hb)));
      std::memcpy(out, &hr, 2);
      break;
    case groveBfloat16:
      std::memcpy(&ha, a, 2);
      std::memcpy(&hb, b, 2);
      hr = refFloatToBf16(
          refOp<float>(op, final, n, bitsF(uint32_t(ha) << 16), bitsF(uint32_t(hb) << 16)));
      std::memcpy(out, &hr, 2);
      break;
    default: break;
  }
}

bool isNanElement(groveDataType_t t, const uint8_t* p) {
  uint16_t h;
  switch (t) {
    case groveFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case groveFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    case groveFloat16: std::memcpy(&h, p, 2); return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    case groveBfloat16: std::memcpy(&h, p, 2); return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    default: return false;
  }
}

// Random elements: integers over their full range, floats in a moderate range.
void fillRandom(groveDataType_t t, uint8_t* p, size_t count, std::mt19937_64& rng) {
  size_t esz = dtypeSize(t);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* e = p + i * esz;
    if (!dtypeIsFloat(t)) {
      uint64_t v = rng();
      std::memcpy(e, &v, esz);
      continue;
    }
    double v = dist(rng);
    if (i % 7 == 3) v = std::round(v);  // exact ties and equal values now and then
    float f = static_cast<float>(v);
    uint16_t h;
    switch (t) {
      case groveFloat32: std::memcpy(e, &f, 4); break;
      case groveFloat64: std::memcpy(e, &v, 8); break;
      case groveFloat16:
        h = refFloatToHalf(f);
        std::memcpy(e, &h, 2);
        break;
      case groveBfloat16:
        h = refFloatToBf16(f);
        std::memcpy(e, &h, 2);
        break;
      default: break;
    }
  }
}

const groveDataType_t kTypes[] = {groveInt8,    groveUint8,   groveInt32,   groveUint32,
                                  groveInt64,   groveUint64,  groveFloat16, groveFloat32,
                                  groveFloat64, groveBfloat16};
const groveRedOp_t kOps[] = {groveSum, groveProd, groveMax, groveMin, groveAvg};

// Checks out[0..count) against the reference of a, b.
::testing::AssertionResult matchesReference(groveDataType_t t, groveRedOp_t op, bool final, int n,
                                            const uint8_t* a, const uint8_t* b, const uint8_t* out,
                                            size_t count) {
  size_t esz = dtypeSize(t);
  uint8_t want[8];
  for (size_t i = 0; i < count; ++i) {
    refElement(t, op, final, n, a + i * esz, b + i * esz, want);
    const uint8_t* got = out + i * esz;
    if (isNanElement(t, want) && isNanElement(t, got)) continue;
    if (std::memcmp(want, got, esz) != 0) {
      uint64_t w = 0, g = 0;
      std::memcpy(&w, want, esz);
      std::memcpy(&g, got, esz);
      return ::testing::AssertionFailure()
             << dtypeName(t) << " " << opName(op) << (final ? " final" : "") << " element " << i
             << " of " << count << ": want 0x" << std::hex << w << " got 0x" << g;
    }
  }
  return ::testing::AssertionSuccess();
}

// ------------------------------------------------------------ reduce

TEST(Reduce, EveryTypeAndOpAgainstReferenceAllSmallSizes) {
  std::mt19937_64 rng(1);
  std::vector<size_t> sizes;
  for (size_t s = 0; s <= 100; ++s) sizes.push_back(s);
  for (size_t s : {127, 128, 129, 1000, 4099, 65537}) sizes.push_back(s);
  for (groveDataType_t t : kTypes) {
    size_t esz = dtypeSize(t);
    for (groveRedOp_t op : kOps) {
      for (bool final : {false, true}) {
        if (final && op != groveAvg) continue;
        for (size_t count : sizes) {
          std::vector<uint8_t> a(count * esz + 1), b(count * esz + 1), out(count * esz + 1, 0xee);
          fillRandom(t, a.data(), count, rng);
          fillRandom(t, b.data(), count, rng);
          reduce(t, op, out.data(), nullptr, a.data(), b.data(), count, final, 3);
          ASSERT_TRUE(matchesReference(t, op, final, 3, a.data(), b.data(), out.data(), count))
              << "count " << count;
          ASSERT_EQ(out[count * esz], 0xee) << "wrote past the end";
        }
      }
    }
  }
}

TEST(Reduce, LargeCountsAndDst2) {
  std::mt19937_64 rng(2);
  size_t count = (1 << 20) + 13;
  for (groveDataType_t t : kTypes) {
    size_t esz = dtypeSize(t);
    std::vector<uint8_t> a(count * esz), b(count * esz), out(count * esz), out2(count * esz);
    fillRandom(t, a.data(), count, rng);
    fillRandom(t, b.data(), count, rng);
    for (groveRedOp_t op : {groveSum, groveMax}) {
      reduce(t, op, out.data(), out2.data(), a.data(), b.data(), count, false, 4);
      ASSERT_TRUE(matchesReference(t, op, false, 4, a.data(), b.data(), out.data(), count));
      ASSERT_EQ(out, out2) << dtypeName(t);
    }
  }
}

TEST(Reduce, MisalignedPointersHeadsAndTails) {
  std::mt19937_64 rng(3);
  for (groveDataType_t t : kTypes) {
    size_t esz = dtypeSize(t);
    for (size_t count : {1, 5, 31, 33, 257, 3000}) {
      for (size_t offA : {0, 1, 3, 8}) {
        for (size_t offB : {0, 2, 4}) {
          for (size_t offD : {0, 1, 6}) {
            std::vector<uint8_t> ab(count * esz + 16), bb(count * esz + 16), ob(count * esz + 16),
                o2(count * esz + 16);
            uint8_t* a = ab.data() + offA;
            uint8_t* b = bb.data() + offB;
            uint8_t* d = ob.data() + offD;
            fillRandom(t, a, count, rng);
            fillRandom(t, b, count, rng);
            reduce(t, groveSum, d, o2.data() + 1, a, b, count, false, 2);
            ASSERT_TRUE(matchesReference(t, groveSum, false, 2, a, b, d, count))
                << "offsets " << offA << " " << offB << " " << offD;
            ASSERT_EQ(std::memcmp(d, o2.data() + 1, count * esz), 0);
          }
        }
      }
    }
  }
}

TEST(Reduce, DstMayAliasEitherInput) {
  std::mt19937_64 rng(4);
  for (groveDataType_t t : kTypes) {
    size_t esz = dtypeSize(t);
    for (groveRedOp_t op : kOps) {
      for (size_t count : {1, 7, 64, 1001}) {
        std::vector<uint8_t> a(count * esz), b(count * esz), out2(count * esz);
        fillRandom(t, a.data(), count, rng);
        fillRandom(t, b.data(), count, rng);
        std::vector<uint8_t> a0 = a, b0 = b;
        // dst == a, with and without dst2
        reduce(t, op, a.data(), out2.data(), a.data(), b.data(), count, true, 3);
        ASSERT_TRUE(matchesReference(t, op, true, 3, a0.data(), b0.data(), a.data(), count));
        ASSERT_EQ(a, out2);
        a = a0;
        reduce(t, op, a.data(), nullptr, a.data(), b.data(), count, true, 3);
        ASSERT_TRUE(matchesReference(t, op, true, 3, a0.data(), b0.data(), a.data(), count));
        // dst == b (operand order kept: a op b)
        reduce(t, op, b.data(), nullptr, a0.data(), b.data(), count, false, 3);
        ASSERT_TRUE(matchesReference(t, op, false, 3, a0.data(), b0.data(), b.data(), count));
        b = b0;
        reduce(t, op, b.data(), out2.data(), a0.data(), b.data(), count, false, 3);
        ASSERT_TRUE(matchesReference(t, op, false, 3, a0.data(), b0.data(), b.data(), count));
        ASSERT_EQ(b, out2);
        // dst == a == b
        a = a0;
        reduce(t, op, a.data(), nullptr, a.data(), a.data(), count, false, 3);
        ASSERT_TRUE(matchesReference(t, op, false, 3, a0.data(), a0.data(), a.data(), count));
      }
    }
  }
}

TEST(Reduce, AvgDividesOnlyWhenFinal) {
  int32_t a[3] = {7, -7, 100}, b[3] = {2, 0, 1}, out[3];
  reduce(groveInt32, groveAvg, out, nullptr, a, b, 3, false, 4);
  EXPECT_EQ(out[0], 9);
  reduce(groveInt32, groveAvg, out, nullptr, a, b, 3, true, 4);
  EXPECT_EQ(out[0], 2);   // 9 / 4
  EXPECT_EQ(out[1], -1);  // -7 / 4 truncates toward zero
  EXPECT_EQ(out[2], 25);
  uint8_t ua[1] = {250}, ub[1] = {10}, uo[1];
  reduce(groveUint8, groveAvg, uo, nullptr, ua, ub, 1, true, 300);  // nranks > 255
  EXPECT_EQ(uo[0], 4 / 300);                                        // (250+10) wraps to 4
  float fa[2] = {1.0f, 3.0f}, fb[2] = {2.0f, 4.0f}, fo[2];
  reduce(groveFloat32, groveAvg, fo, nullptr, fa, fb, 2, true, 3);
  EXPECT_EQ(fo[0], 1.0f);
  EXPECT_EQ(fo[1], 7.0f / 3.0f);
  EXPECT_THROW(reduce(groveFloat32, groveAvg, fo, nullptr, fa, fb, 2, true, 0), Error);
}

TEST(Reduce, IntegerWrapAndNanPropagation) {
  int32_t a = INT32_MAX, b = 1, o;
  reduce(groveInt32, groveSum, &o, nullptr, &a, &b, 1, false, 1);
  EXPECT_EQ(o, INT32_MIN);
  int64_t x = INT64_MIN, y = -1, z;
  reduce(groveInt64, groveProd, &z, nullptr, &x, &y, 1, false, 1);
  EXPECT_EQ(z, INT64_MIN);
  int8_t c = -128, d = -1, e;
  reduce(groveInt8, groveProd, &e, nullptr, &c, &d, 1, false, 1);
  EXPECT_EQ(e, -128);
  float nan = std::numeric_limits<float>::quiet_NaN();
  float fa[4] = {nan, 1.0f, nan, -0.0f}, fb[4] = {1.0f, nan, nan, 0.0f}, fo[4];
  for (groveRedOp_t op : {groveMax, groveMin}) {
    reduce(groveFloat32, op, fo, nullptr, fa, fb, 4, false, 1);
    EXPECT_TRUE(std::isnan(fo[0]) && std::isnan(fo[1]) && std::isnan(fo[2])) << opName(op);
  }
  uint16_t hinf = 0x7c00, hbig = 0x7bff, ho;  // Inf, 65504
  reduce(groveFloat16, groveSum, &ho, nullptr, &hbig, &hbig, 1, false, 1);
  EXPECT_EQ(ho, hinf);
  EXPECT_THROW(reduce(groveNumTypes, groveSum, fo, nullptr, fa, fb, 1, false, 1), Error);
  EXPECT_THROW(reduce(groveFloat32, groveNumOps, fo, nullptr, fa, fb, 1, false, 1), Error);
}

TEST(Reduce, CopyIsMemcpy) {
  std::vector<uint8_t> src(1000), dst(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  copy(dst.data() + 1, src.data() + 3, 900);
  EXPECT_EQ(std::memcmp(dst.data() + 1, src.data() + 3, 900), 0);
  copy(nullptr, nullptr, 0);
}

// The F16C path (used where the CPU has it) and the portable path give the
// same bits for every op, Inf and subnormals included (a NaN result is NaN
// in both; its payload may come from either input).
TEST(Reduce, Float16PathsAgreeBitForBit) {
  std::printf("  float16 reduce uses %s\n", detail::float16UsesF16c() ? "F16C" : "portable code");
  std::vector<uint16_t> a, b;
  std::mt19937_64 rng(5);
  for (uint32_t h = 0; h < 65536; ++h) {
    a.push_back(static_cast<uint16_t>(h));
    b.push_back(static_cast<uint16_t>(rng()));
  }
  for (uint16_t s : {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x7c01, 0x7e00,
                     0xfd55, 0x3c00, 0xbc00}) {
    std::vector<uint16_t> sv(a.size(), s);
    b.insert(b.end(), sv.begin(), sv.end());
    a.insert(a.end(), a.begin(), a.begin() + 65536);
  }
  std::vector<uint16_t> o1(a.size()), o2(a.size());
  for (groveRedOp_t op : kOps) {
    for (bool final : {false, true}) {
      detail::ReduceArgs args{op, final, 3, o1.data(), nullptr, a.data(), b.data(), a.size()};
      detail::reduceFloat16(args);
      args.dst = o2.data();
      detail::reduceFloat16Soft(args);
      for (size_t i = 0; i < a.size(); ++i) {
        bool bothNan = isNanElement(groveFloat16, reinterpret_cast<uint8_t*>(&o1[i])) &&
                       isNanElement(groveFloat16, reinterpret_cast<uint8_t*>(&o2[i]));
        if (bothNan) continue;  // which input's payload wins is the compiler's choice
        ASSERT_EQ(o1[i], o2[i]) << opName(op) << " " << std::hex << a[i] << " " << b[i];
      }
    }
  }
}

// Prints rough throughput (no assertion: the machine is shared).
TEST(Reduce, ThroughputReport) {
  size_t count = 1 << 22;
  for (groveDataType_t t : {groveFloat32, groveFloat16, groveBfloat16, groveInt8}) {
    size_t esz = dtypeSize(t);
    std::vector<uint8_t> a(count * esz, 0), b(count * esz, 0);
    reduce(t, groveSum, a.data(), nullptr, a.data(), b.data(), count, false, 1);
    auto t0 = std::chrono::steady_clock::now();
    int reps = 5;
    for (int i = 0; i < reps; ++i) {
      reduce(t, groveSum, a.data(), nullptr, a.data(), b.data(), count, false, 1);
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  reduce sum %-8s in place: %.2f Gelem/s (%.1f GB/s of output)\n", dtypeName(t),
                reps * count / s / 1e9, reps * count * esz / s / 1e9);
  }
}

// ------------------------------------------------------------ conversions

TEST(Convert, EveryHalfToFloatAndRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t bits = static_cast<uint16_t>(h);
    float got = halfToFloat(bits);
    float want = refHalfToFloat(bits);
    bool nan = (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(fBits(got) >> 31, uint32_t(bits >> 15)) << "NaN sign " << std::hex << h;
      ASSERT_EQ(floatToHalf(got), bits | 0x200) << "NaN comes back quiet, payload kept";
      continue;
    }
    ASSERT_EQ(fBits(got), fBits(want)) << std::hex << h;
    ASSERT_EQ(floatToHalf(got), bits) << std::hex << h;
  }
}

TEST(Convert, FloatToHalfRoundsToNearestEven) {
  // Every midpoint between adjacent finite halves, and one float ulp either side.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      float lo = refHalfToFloat(static_cast<uint16_t>(h | sign));
      float hi = refHalfToFloat(static_cast<uint16_t>((h + 1) | sign));
      float mid = (lo + hi) / 2;  // exact: halves have 11 significant bits
      for (float f : {lo, mid, std::nextafter(mid, lo), std::nextafter(mid, hi)}) {
        ASSERT_EQ(floatToHalf(f), refFloatToHalf(f)) << std::hexfloat << f;
      }
    }
  }
  // A sweep over all float exponents, and the special cases.
  for (uint64_t u = 0; u < (1ull << 32); u += 65521) {
    float f = bitsF(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToHalf(f), refFloatToHalf(f)) << std::hexfloat << f;
  }
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (0)
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp -> 2
  EXPECT_EQ(floatToHalf(bitsF(1)), 0x0000);               // float denormal
  uint16_t qnan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qnan & 0x7e00, 0x7e00);
  uint16_t snan = floatToHalf(bitsF(0x7f800001u));
  EXPECT_EQ(snan & 0x7e00, 0x7e00) << "a float NaN whose payload is in the low bits stays NaN";
}

TEST(Convert, Bfloat16RoundTripAndRounding) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = bf16ToFloat(bits);
    ASSERT_EQ(fBits(f), uint32_t(bits) << 16);
    bool nan = (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
    if (nan) {
      ASSERT_EQ(floatToBf16(f), bits | 0x40) << std::hex << b;
      continue;
    }
    ASSERT_EQ(floatToBf16(f), bits) << std::hex << b;
    if ((bits & 0x7fff) >= 0x7f80) continue;  // Inf has no upper neighbour
    float next = bitsF((uint32_t(bits) + 1) << 16);
    float mid = bitsF((uint32_t(bits) << 16) | 0x8000);
    for (float g : {mid, std::nextafter(mid, f), std::nextafter(mid, next)}) {
      ASSERT_EQ(floatToBf16(g), refFloatToBf16(g)) << std::hexfloat << g;
    }
  }
  for (uint64_t u = 0; u < (1ull << 32); u += 65521) {
    float f = bitsF(static_cast<uint32_t>(u));
    ASSERT_EQ(floatToBf16(f), refFloatToBf16(f)) << std::hexfloat << f;
  }
  EXPECT_EQ(floatToBf16(bitsF(0x7f800001u)) & 0x7fc0, 0x7fc0);  // NaN stays NaN
}

}  // namespace
}  // namespace grove::kernels
