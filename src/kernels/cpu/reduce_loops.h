// The element-wise loops behind kernels::reduce (internal to grove_kernels).
//
// How it works: a reduction is a (codec, op) pair. The codec says how an
// element is stored and in which type it is computed (int8 in int8, half in
// float, ...); the op combines two computed values. Every loop is a plain
// indexed for-loop over restrict-qualified pointers with no branches in its
// body, which the compiler vectorises; the per-dtype entry points
// (reduce_ints.cc, reduce_floats.cc) are compiled once per instruction set
// with GCC function multiversioning, and everything here is force-inlined
// into them so each clone gets its own vector code.
//
// Aliasing: the public contract lets dst equal a or b exactly. Rather than
// let the compiler version the loop on a run-time overlap test (which fails,
// and falls back to scalar code, exactly when dst == a), the dispatcher
// picks an in-place loop whose pointers really are disjoint. Any other
// combination (a == b == dst, ...) runs a loop without restrict.
//
// Alignment: pointers that are not a multiple of the element size (legal
// for the byte-oriented callers of tests) are handled by staging blocks
// through aligned stack arrays with memcpy, then running the normal loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/fp16.h"
#include "grove/grove.h"

namespace grove::kernels::detail {

/// Arguments of one reduce call, as passed to the per-dtype entry points.
struct ReduceArgs {
  groveRedOp_t op;
  bool final;
  int nranks;
  void* dst;
  void* dst2;
  const void* a;
  const void* b;
  size_t count;
};

// Per-dtype entry points (each built for several instruction sets).
void reduceInt8(const ReduceArgs& args);
void reduceUint8(const ReduceArgs& args);
void reduceInt32(const ReduceArgs& args);
void reduceUint32(const ReduceArgs& args);
void reduceInt64(const ReduceArgs& args);
void reduceUint64(const ReduceArgs& args);
void reduceFloat16(const ReduceArgs& args);
/// fp16 with the portable (branch-free integer) conversions; reduceFloat16
/// uses F16C instead where the CPU has it. Both give identical bits.
void reduceFloat16Soft(const ReduceArgs& args);
/// True when reduceFloat16 takes the F16C path.
bool float16UsesF16c();
void reduceFloat32(const ReduceArgs& args);
void reduceFloat64(const ReduceArgs& args);
void reduceBfloat16(const ReduceArgs& args);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GROVE_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define GROVE_KERNEL_CLONES
#endif

// ------------------------------------------------------------------ codecs

/// Stored and computed as T.
template <class T>
struct PlainCodec {
  using Storage = T;
  using Compute = T;
  static GROVE_ALWAYS_INLINE Compute load(Storage v) { return v; }
  static GROVE_ALWAYS_INLINE Storage store(Compute v) { return v; }
};

/// IEEE half stored as bits, computed in float.
struct HalfCodec {
  using Storage = uint16_t;
  using Compute = float;
  static GROVE_ALWAYS_INLINE Compute load(Storage v) { return fp16::halfBitsToFloat(v); }
  static GROVE_ALWAYS_INLINE Storage store(Compute v) { return fp16::floatToHalfBits(v); }
};

/// bfloat16 stored as bits, computed in float.
struct Bf16Codec {
  using Storage = uint16_t;
  using Compute = float;
  static GROVE_ALWAYS_INLINE Compute load(Storage v) { return fp16::bf16BitsToFloat(v); }
  static GROVE_ALWAYS_INLINE Storage store(Compute v) { return fp16::floatToBf16Bits(v); }
};

// ------------------------------------------------------------------ ops

/// a + b; integers wrap (computed in the unsigned type: no UB).
template <class C>
GROVE_ALWAYS_INLINE C addWrap(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

struct SumOp {
  template <class C>
  GROVE_ALWAYS_INLINE C operator()(C a, C b) const {
    return addWrap(a, b);
  }
};

struct ProdOp {
  template <class C>
  GROVE_ALWAYS_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      using U = std::make_unsigned_t<C>;
      // Promote narrow types to unsigned int so the product cannot overflow a signed int.
      using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
      return static_cast<C>(
          static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
    } else {
      return a * b;
    }
  }
};

/// Max; for floats a NaN in either operand gives NaN.
struct MaxOp {
  template <class C>
  GROVE_ALWAYS_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      return b > a ? b : a;
    } else {
      return (b > a || b != b) ? b : a;
    }
  }
};

/// Min; for floats a NaN in either operand gives NaN.
struct MinOp {
  template <class C>
  GROVE_ALWAYS_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      return b < a ? b : a;
    } else {
      return (b < a || b != b) ? b : a;
    }
  }
};

/// Last step of avg: (a + b) / n, integer division for integers.
struct AvgFinalOp {
  int n;
  template <class C>
  GROVE_ALWAYS_INLINE C operator()(C a, C b) const {
    C s = addWrap(a, b);
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
      return static_cast<C>(static_cast<int64_t>(s) / static_cast<int64_t>(n));
    } else if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(static_cast<uint64_t>(s) / static_cast<uint64_t>(n));
    } else {
      return s / static_cast<C>(n);
    }
  }
};

// ------------------------------------------------------------------ loops

/// dst = op(a, b) [and dst2], all four disjoint (a and b may be equal: read only).
template <class Codec, bool kDst2, class Op>
GROVE_ALWAYS_INLINE void loopDistinct(typename Codec::Storage* __restrict dst,
                                      typename Codec::Storage* __restrict dst2,
                                      const typename Codec::Storage* __restrict a,
                                      const typename Codec::Storage* __restrict b, size_t n,
                                      Op op) {
  for (size_t i = 0; i < n; ++i) {
    typename Codec::Storage r = Codec::store(op(Codec::load(a[i]), Codec::load(b[i])));
    dst[i] = r;
    if constexpr (kDst2) dst2[i] = r;
  }
}

/// dst = op(dst, b) (or op(b, dst) when kSwap) [and dst2].
template <class Codec, bool kDst2, bool kSwap, class Op>
GROVE_ALWAYS_INLINE void loopInPlace(typename Codec::Storage* __restrict dst,
                                     typename Codec::Storage* __restrict dst2,
                                     const typename Codec::Storage* __restrict b, size_t n, Op op) {
  for (size_t i = 0; i < n; ++i) {
    typename Codec::Compute x = Codec::load(dst[i]);
    typename Codec::Compute y = Codec::load(b[i]);
    typename Codec::Storage r = Codec::store(kSwap ? op(y, x) : op(x, y));
    dst[i] = r;
    if constexpr (kDst2) dst2[i] = r;
  }
}

/// Any exact aliasing among dst, a, b; no restrict.
template <class Codec, class Op>
GROVE_ALWAYS_INLINE void loopAliased(typename Codec::Storage* dst, typename Codec::Storage* dst2,
                                     const typename Codec::Storage* a,
                                     const typename Codec::Storage* b, size_t n, Op op) {
  for (size_t i = 0; i < n; ++i) {
    typename Codec::Storage r = Codec::store(op(Codec::load(a[i]), Codec::load(b[i])));
    dst[i] = r;
    if (dst2 != nullptr) dst2[i] = r;
  }
}

/// Pointers not aligned to the element: stage blocks through aligned arrays.
template <class Codec, class Op>
GROVE_ALWAYS_INLINE void loopMisaligned(const ReduceArgs& args, Op op) {
  using S = typename Codec::Storage;
  constexpr size_t kBlock = 1024 / sizeof(S);
  alignas(64) S ta[kBlock];
  alignas(64) S tb[kBlock];
  alignas(64) S td[kBlock];
  auto* dst = static_cast<unsigned char*>(args.dst);
  auto* dst2 = static_cast<unsigned char*>(args.dst2);
  auto* a = static_cast<const unsigned char*>(args.a);
  auto* b = static_cast<const unsigned char*>(args.b);
  for (size_t done = 0; done < args.count;) {
    size_t n = args.count - done < kBlock ? args.count - done : kBlock;
    size_t bytes = n * sizeof(S);
    std::memcpy(ta, a + done * sizeof(S), bytes);
    std::memcpy(tb, b + done * sizeof(S), bytes);
    loopDistinct<Codec, false>(td, nullptr, ta, tb, n, op);
    std::memcpy(dst + done * sizeof(S), td, bytes);
    if (dst2 != nullptr) std::memcpy(dst2 + done * sizeof(S), td, bytes);
    done += n;
  }
}

/// Picks the loop for the pointers' aliasing and alignment.
template <class Codec, class Op>
GROVE_ALWAYS_INLINE void runOp(const ReduceArgs& args, Op op) {
  using S = typename Codec::Storage;
  auto* dst = static_cast<S*>(args.dst);
  auto* dst2 = static_cast<S*>(args.dst2);
  auto* a = static_cast<const S*>(args.a);
  auto* b = static_cast<const S*>(args.b);
  size_t n = args.count;
  uintptr_t bits = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(dst2) |
                   reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b);
  if (bits % alignof(S) != 0) {
    loopMisaligned<Codec>(args, op);
  } else if (dst != a && dst != b) {
    if (dst2 != nullptr)
      loopDistinct<Codec, true>(dst, dst2, a, b, n, op);
    else
      loopDistinct<Codec, false>(dst, nullptr, a, b, n, op);
  } else if (a == b) {
    loopAliased<Codec>(dst, dst2, a, b, n, op);
  } else if (dst == a) {
    if (dst2 != nullptr)
      loopInPlace<Codec, true, false>(dst, dst2, b, n, op);
    else
      loopInPlace<Codec, false, false>(dst, nullptr, b, n, op);
  } else {
    if (dst2 != nullptr)
      loopInPlace<Codec, true, true>(dst, dst2, a, n, op);
    else
      loopInPlace<Codec, false, true>(dst, nullptr, a, n, op);
  }
}

/// Dispatches on the op (the body of every per-dtype entry point).
template <class Codec>
GROVE_ALWAYS_INLINE void reduceTyped(const ReduceArgs& args) {
  switch (args.op) {
    case groveSum: runOp<Codec>(args, SumOp{}); break;
    case groveProd: runOp<Codec>(args, ProdOp{}); break;
    case groveMax: runOp<Codec>(args, MaxOp{}); break;
    case groveMin: runOp<Codec>(args, MinOp{}); break;
    case groveAvg:
      if (args.final)
        runOp<Codec>(args, AvgFinalOp{args.nranks});
      else
        runOp<Codec>(args, SumOp{});
      break;
    default: break;  // validated by the caller
  }
}

}  // namespace grove::kernels::detail
