// Per-dtype reduce entry points for the floating-point types, each compiled
// for several instruction sets (GROVE_KERNEL_CLONES); see reduce_loops.h.
// half and bfloat16 are computed in float and rounded once per element.
//
// fp16 has one more path: on CPUs with F16C (every AVX2 CPU in practice) the
// conversions use vcvtph2ps / vcvtps2ph (rounding mode: nearest even), which
// are several times faster than the integer conversions GCC can vectorise.
// It works in blocks: widen a block of a and b to float arrays, run the op
// over the arrays (auto-vectorised), narrow the result into dst (and dst2).
// Blocks read both inputs before writing, so dst may alias a or b exactly;
// unaligned loads and stores make any pointer alignment fine. The bits equal
// those of the portable path (base/fp16.h mimics F16C's NaN handling), except the
// payload of a NaN result when both inputs are NaN.
#include "kernels/cpu/reduce_loops.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define GROVE_F16C_PATH 1
#endif

namespace grove::kernels::detail {

GROVE_KERNEL_CLONES void reduceFloat16Soft(const ReduceArgs& args) { reduceTyped<HalfCodec>(args); }
GROVE_KERNEL_CLONES void reduceBfloat16(const ReduceArgs& args) { reduceTyped<Bf16Codec>(args); }
GROVE_KERNEL_CLONES void reduceFloat32(const ReduceArgs& args) {
  reduceTyped<PlainCodec<float>>(args);
}
GROVE_KERNEL_CLONES void reduceFloat64(const ReduceArgs& args) {
  reduceTyped<PlainCodec<double>>(args);
}

#ifdef GROVE_F16C_PATH
namespace {

#define GROVE_F16C_TARGET __attribute__((target("avx2,f16c")))

GROVE_F16C_TARGET GROVE_ALWAYS_INLINE void widen(float* out, const uint8_t* in, size_t n) {
  size_t full = n & ~size_t{7};
  for (size_t i = 0; i < full; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_store_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (size_t i = full; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = fp16::halfBitsToFloat(h);
  }
}

GROVE_F16C_TARGET GROVE_ALWAYS_INLINE void narrow(uint8_t* out, uint8_t* out2, const float* in,
                                                  size_t n) {
  size_t full = n & ~size_t{7};
  for (size_t i = 0; i < full; i += 8) {
    __m128i h =
        _mm256_cvtps_ph(_mm256_load_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
    if (out2 != nullptr) _mm_storeu_si128(reinterpret_cast<__m128i*>(out2 + 2 * i), h);
  }
  for (size_t i = full; i < n; ++i) {
    uint16_t h = fp16::floatToHalfBits(in[i]);
    std::memcpy(out + 2 * i, &h, 2);
    if (out2 != nullptr) std::memcpy(out2 + 2 * i, &h, 2);
  }
}

template <class Op>
GROVE_F16C_TARGET GROVE_ALWAYS_INLINE void halfBlocks(const ReduceArgs& args, Op op) {
  constexpr size_t kBlock = 512;
  alignas(32) float ta[kBlock];
  alignas(32) float tb[kBlock];
  auto* dst = static_cast<uint8_t*>(args.dst);
  auto* dst2 = static_cast<uint8_t*>(args.dst2);
  auto* a = static_cast<const uint8_t*>(args.a);
  auto* b = static_cast<const uint8_t*>(args.b);
  for (size_t done = 0; done < args.count; done += kBlock) {
    size_t n = args.count - done < kBlock ? args.count - done : kBlock;
    size_t off = 2 * done;
    widen(ta, a + off, n);
    widen(tb, b + off, n);
    for (size_t i = 0; i < n; ++i) ta[i] = op(ta[i], tb[i]);
    narrow(dst + off, dst2 != nullptr ? dst2 + off : nullptr, ta, n);
  }
}

GROVE_F16C_TARGET void reduceFloat16F16c(const ReduceArgs& args) {
  switch (args.op) {
    case groveSum: halfBlocks(args, SumOp{}); break;
    case groveProd: halfBlocks(args, ProdOp{}); break;
    case groveMax: halfBlocks(args, MaxOp{}); break;
    case groveMin: halfBlocks(args, MinOp{}); break;
    case groveAvg:
      if (args.final)
        halfBlocks(args, AvgFinalOp{args.nranks});
      else
        halfBlocks(args, SumOp{});
      break;
    default: break;
  }
}

}  // namespace

bool float16UsesF16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}

void reduceFloat16(const ReduceArgs& args) {
  if (float16UsesF16c()) {
    reduceFloat16F16c(args);
  } else {
    reduceFloat16Soft(args);
  }
}
#else
bool float16UsesF16c() { return false; }
void reduceFloat16(const ReduceArgs& args) { reduceFloat16Soft(args); }
#endif

}  // namespace grove::kernels::detail
