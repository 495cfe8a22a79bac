// Branch-free float <-> half / bfloat16 conversions (round to nearest even),
// the one copy every part of the project uses: the CPU reduction kernels,
// the perf programs' checks, the NCCL library's PreMulSum, the tests'
// oracles. Header-only and stateless, so programs outside the library (which
// link libgrove.so and grove_dtype) may include it too.
//
// How it works: every conversion is straight-line integer and float
// arithmetic followed by selects, with no branches and no table lookups, so
// the compiler turns a loop of them into SIMD code (8 lanes with AVX2). The
// kernels file is built with -fno-trapping-math, which lets the compiler
// compute both arms of each select and blend them.
//
//   half -> float: move the exponent/mantissa field into place and rebias
//   the exponent; Inf/NaN get the all-ones exponent; subnormals are rebuilt
//   with one exact float subtraction (the "magic number" trick). A NaN comes
//   out quiet with its payload kept (as the F16C instruction vcvtph2ps does).
//
//   float -> half: values at or above 2^16 become Inf (or a quiet NaN that
//   keeps the top payload bits, as vcvtps2ph does); values below 2^-14 are
//   rounded by one float addition of 2^-1, whose rounding (nearest even in
//   the default mode) is exactly the half subnormal rounding; normal values
//   get the rounding bias 0x0fff plus the parity of the kept mantissa, then
//   a shift. A carry out of the mantissa bumps the exponent, which also maps
//   [65520, 65536) to Inf as IEEE requires.
//
//   float <-> bfloat16: bfloat16 is the top half of a float: widening is a
//   shift; narrowing adds 0x7fff plus the parity bit and shifts, and keeps
//   NaN quiet.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__GNUC__)
#define GROVE_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define GROVE_ALWAYS_INLINE inline
#endif

namespace grove::fp16 {

GROVE_ALWAYS_INLINE float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

GROVE_ALWAYS_INLINE uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// IEEE half bits -> float (exact).
GROVE_ALWAYS_INLINE float halfBitsToFloat(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t o = static_cast<uint32_t>(h & 0x7fffu) << 13;
  uint32_t exp = o & kShiftedExp;
  o += (127u - 15u) << 23;
  // Inf/NaN: all-ones exponent; NaN also gets the quiet bit.
  uint32_t infNan = (o + ((128u - 16u) << 23)) | ((o & 0x7fffffu) != 0 ? 0x400000u : 0u);
  // Subnormal: (mantissa as a float with exponent -14) - 2^-14, exact.
  uint32_t sub = floatToBits(bitsToFloat(o + (1u << 23)) - bitsToFloat(113u << 23));
  uint32_t r = exp == kShiftedExp ? infNan : (exp == 0 ? sub : o);
  return bitsToFloat(r | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

/// float -> IEEE half bits, round to nearest even.
GROVE_ALWAYS_INLINE uint16_t floatToHalfBits(float f) {
  uint32_t u = floatToBits(f);
  uint32_t sign = u & 0x80000000u;
  u ^= sign;
  // u >= 2^16 (as a float): Inf, or a quiet NaN keeping the top payload bits.
  uint32_t infNan = u > (255u << 23) ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
  // u < 2^-14: adding 0.5 rounds the mantissa into the low bits (RNE).
  uint32_t sub = floatToBits(bitsToFloat(u) + bitsToFloat(126u << 23)) - (126u << 23);
  // Normal: rebias, add the rounding bias and the parity of the kept mantissa.
  uint32_t norm = (u + ((15u - 127u) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  uint32_t r = u >= (143u << 23) ? infNan : (u < (113u << 23) ? sub : norm);
  return static_cast<uint16_t>(r | (sign >> 16));
}

/// bfloat16 bits -> float (exact).
GROVE_ALWAYS_INLINE float bf16BitsToFloat(uint16_t b) {
  return bitsToFloat(static_cast<uint32_t>(b) << 16);
}

/// float -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN.
GROVE_ALWAYS_INLINE uint16_t floatToBf16Bits(float f) {
  uint32_t u = floatToBits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  bool isNan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(isNan ? nan : rounded);
}

}  // namespace grove::fp16
