// Element-wise ops of the CUDA kernels, one functor per fold kind, for every
// grove storage type (int8_t ... uint64_t, float, double, __half,
// __nv_bfloat16). Device code; included by device_kernels.cuh.
//
// How it works: each op mirrors the CPU loop of kernels/cpu/reduce_loops.h
// so results match bit for bit.
//   - Integers: sums and products wrap (computed in the unsigned type, narrow
//     types promoted to unsigned int); min/max compare.
//   - float/double: IEEE ops with explicit round-to-nearest intrinsics
//     (never contracted into an FMA, whatever -fmad says).
//   - __half/__nv_bfloat16: native arithmetic (__hadd/__hmul, two lanes at a
//     time on packs). The exact sum or product of two halves rounded once to
//     the type equals the CPU's "compute in float, round to the type": float
//     has more than twice the precision plus two bits, so the double rounding
//     cannot differ.
//   - min/max: for floats a NaN in either operand gives NaN, with the CPU's
//     choice: b when b is NaN or greater, else a. fp16/bf16 results that are
//     NaN come out quiet, as the CPU's round trip through float makes them.
//   - avg's final step: (a + b) / n; integer division for integers, float
//     for fp16/bf16 (sum and quotient in float, one rounding to the type),
//     exactly as the CPU's AvgFinalOp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace grove::kernels::cuda::dev {

/// True for the 16-bit float types computed natively.
template <class T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// The two-lane vector type of a 16-bit float type.
template <class T>
using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

/// Quiets a 16-bit float NaN (sets the top mantissa bit), as the CPU's round trip does.
template <class T>
__device__ __forceinline__ T quietNan(T v) {
  unsigned short bits = *reinterpret_cast<const unsigned short*>(&v);
  if constexpr (std::is_same_v<T, __half>) {
    if ((bits & 0x7fffu) > 0x7c00u) bits |= 0x0200u;
  } else {
    if ((bits & 0x7fffu) > 0x7f80u) bits |= 0x0040u;
  }
  return *reinterpret_cast<const T*>(&bits);
}

/// Widens a 16-bit float to float (exact).
template <class T>
__device__ __forceinline__ float toFloat(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else
    return __bfloat162float(v);
}

/// Narrows a float to a 16-bit float, round to nearest even.
template <class T>
__device__ __forceinline__ T fromFloat(float v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else
    return __float2bfloat16_rn(v);
}

/// Wrapping integer add.
template <class T>
__device__ __forceinline__ T addWrap(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}

/// a + b.
struct SumOp {
  static constexpr bool kPaired = true;
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return addWrap(a, b);
    else if constexpr (std::is_same_v<T, float>)
      return __fadd_rn(a, b);
    else if constexpr (std::is_same_v<T, double>)
      return __dadd_rn(a, b);
    else
      return __hadd(a, b);
  }
  __device__ __forceinline__ __half2 pair(__half2 a, __half2 b) const { return __hadd2(a, b); }
  __device__ __forceinline__ __nv_bfloat162 pair(__nv_bfloat162 a, __nv_bfloat162 b) const {
    return __hadd2(a, b);
  }
};

/// a * b (integers wrap).
struct ProdOp {
  static constexpr bool kPaired = true;
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
      return static_cast<T>(
          static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
    } else if constexpr (std::is_same_v<T, float>) {
      return __fmul_rn(a, b);
    } else if constexpr (std::is_same_v<T, double>) {
      return __dmul_rn(a, b);
    } else {
      return __hmul(a, b);
    }
  }
  __device__ __forceinline__ __half2 pair(__half2 a, __half2 b) const { return __hmul2(a, b); }
  __device__ __forceinline__ __nv_bfloat162 pair(__nv_bfloat162 a, __nv_bfloat162 b) const {
    return __hmul2(a, b);
  }
};

/// max (kMax) or min of a and b as the CPU loops pick: b when b is NaN or wins, else a.
template <bool kMax, class T>
__device__ __forceinline__ T pickMinMax(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return (kMax ? b > a : b < a) ? b : a;
  } else if constexpr (kIsHalfLike<T>) {
    float fa = toFloat(a), fb = toFloat(b);
    bool takeB = (kMax ? fb > fa : fb < fa) || fb != fb;
    return quietNan(takeB ? b : a);
  } else {
    return ((kMax ? b > a : b < a) || b != b) ? b : a;
  }
}

/// max(a, b); a NaN in either operand gives NaN.
struct MaxOp {
  static constexpr bool kPaired = false;
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return pickMinMax<true>(a, b);
  }
};

/// min(a, b); a NaN in either operand gives NaN.
struct MinOp {
  static constexpr bool kPaired = false;
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return pickMinMax<false>(a, b);
  }
};

/// avg's final step: (a + b) / n.
struct AvgFinalOp {
  static constexpr bool kPaired = false;
  int n;
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Division in at least 32 bits equals the CPU's 64-bit division here:
      // n >= 1 and the quotient has the magnitude of s.
      using W = std::conditional_t<(sizeof(T) < 4),
                                   std::conditional_t<std::is_signed_v<T>, int, unsigned>, T>;
      T s = addWrap(a, b);
      return static_cast<T>(static_cast<W>(s) / static_cast<W>(n));
    } else if constexpr (std::is_same_v<T, float>) {
      return __fdiv_rn(__fadd_rn(a, b), static_cast<float>(n));
    } else if constexpr (std::is_same_v<T, double>) {
      return __ddiv_rn(__dadd_rn(a, b), static_cast<double>(n));
    } else {
      return fromFloat<T>(__fdiv_rn(__fadd_rn(toFloat(a), toFloat(b)), static_cast<float>(n)));
    }
  }
};

/// Applies op lane by lane to two 16-byte packs of T.
template <class T, class Op>
__device__ __forceinline__ uint4 applyPack(uint4 x, uint4 y, Op op) {
  if constexpr (kIsHalfLike<T> && Op::kPaired) {
    auto* xs = reinterpret_cast<Pair<T>*>(&x);
    const auto* ys = reinterpret_cast<const Pair<T>*>(&y);
#pragma unroll
    for (int i = 0; i < 4; ++i) xs[i] = op.pair(xs[i], ys[i]);
  } else {
    constexpr int kLanes = 16 / sizeof(T);
    auto* xs = reinterpret_cast<T*>(&x);
    const auto* ys = reinterpret_cast<const T*>(&y);
#pragma unroll
    for (int i = 0; i < kLanes; ++i) xs[i] = op(xs[i], ys[i]);
  }
  return x;
}

}  // namespace grove::kernels::cuda::dev
