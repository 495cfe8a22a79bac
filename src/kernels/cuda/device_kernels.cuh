// Device-side copy and reduce over one slice, for kernels to call: the
// standalone kernels of this folder run them over the whole grid, and a
// persistent kernel (one block per channel) runs them with its block's
// threads, e.g. reduceSlice<float>(srcs, n, dst, nullptr, count,
// threadIdx.x, blockDim.x, SumOp{}, SumOp{}).
//
// How it works: the pointers' common alignment (split.h) decides the
// shape. When every pointer sits at the same offset modulo 16, a few
// elements of head bring them to 16-byte alignment, the body moves 16-byte
// words (uint4), kUnroll of them per thread per iteration (all loads issued
// before the math, so each thread keeps several requests in flight), and a
// tail finishes the elements that do not fill a word. Otherwise the reduce
// runs element by element (still coalesced), and the copy uses the largest
// word (8, 4, 2 bytes) the two pointers share. Threads stride through every
// part (thread t handles words t, t + nthreads, ...), so any thread count
// and any grid shape cover the slice exactly once.
//
// Pointers are global memory (device memory, a peer's memory mapped by CUDA
// IPC, mapped host memory), never shared memory: the word loops tell the
// compiler so, which gives it global loads instead of generic ones.
//
// The fold: dst = s0 op s1 op ... op s(n-1), left to right; LastOp applies
// to the last step (avg's division), Op to the others. Every thread reads
// its elements of all sources before it writes them, so a destination may
// equal a source exactly (in-place).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/reduce_ops.cuh"
#include "kernels/cuda/split.h"

namespace grove::kernels::cuda::dev {

/// Words each thread moves per iteration of a body loop (loads first, then stores).
inline constexpr int kUnroll = 4;

/// Copies n words of type W; thread tid of nthreads.
template <class W>
__device__ __forceinline__ void copyWords(W* d, const W* s, size_t n, size_t tid, size_t nthreads) {
  __builtin_assume(__isGlobal(d));
  __builtin_assume(__isGlobal(s));
  size_t i = tid;
  for (; i + (kUnroll - 1) * nthreads < n; i += kUnroll * nthreads) {
    W v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = s[i + u * nthreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[i + u * nthreads] = v[u];
  }
  for (; i < n; i += nthreads) d[i] = s[i];
}

/// Copies bytes from src to dst with threads tid of nthreads (memcpy semantics).
__device__ __forceinline__ void copySlice(void* dst, const void* src, size_t bytes, size_t tid,
                                          size_t nthreads) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<const unsigned char*>(src);
  const unsigned w =
      wordSizeOfDiff(reinterpret_cast<uintptr_t>(d) - reinterpret_cast<uintptr_t>(s));
  const WordSplit sp = splitWords(reinterpret_cast<uintptr_t>(d), bytes, 1, w);
  for (size_t i = tid; i < sp.head; i += nthreads) d[i] = s[i];
  d += sp.head;
  s += sp.head;
  switch (sp.words != 0 ? w : 1) {
    case 16:
      copyWords(reinterpret_cast<uint4*>(d), reinterpret_cast<const uint4*>(s), sp.words, tid,
                nthreads);
      break;
    case 8:
      copyWords(reinterpret_cast<uint2*>(d), reinterpret_cast<const uint2*>(s), sp.words, tid,
                nthreads);
      break;
    case 4:
      copyWords(reinterpret_cast<unsigned*>(d), reinterpret_cast<const unsigned*>(s), sp.words, tid,
                nthreads);
      break;
    case 2:
      copyWords(reinterpret_cast<unsigned short*>(d), reinterpret_cast<const unsigned short*>(s),
                sp.words, tid, nthreads);
      break;
    default: break;  // no words (w == 1: everything was head)
  }
  d += sp.words * w;
  s += sp.words * w;
  for (size_t i = tid; i < sp.tail; i += nthreads) d[i] = s[i];
}

/// Folds element i of the sources (p[0..nsrc)).
template <class T, class Op, class LastOp>
__device__ __forceinline__ T foldElement(const T* const* p, int nsrc, size_t i, Op op,
                                         LastOp last) {
  T acc = p[0][i];
#pragma unroll 1
  for (int s = 1; s + 1 < nsrc; ++s) acc = op(acc, p[s][i]);
  return last(acc, p[nsrc - 1][i]);
}

/// Loads kUnroll words of q (i, i + stride, ...) and folds them into acc with op.
template <class T, class Op>
__device__ __forceinline__ void foldInto(uint4 (&acc)[kUnroll], const uint4* q, size_t i,
                                         size_t stride, Op op) {
  __builtin_assume(__isGlobal(q));
  uint4 v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) v[u] = q[i + u * stride];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) acc[u] = applyPack<T>(acc[u], v[u], op);
}

/// Folds the 16-byte words of the sources into d (and d2); thread tid of nthreads.
/// The source loop is not unrolled: one copy of the body serves every source
/// count, which keeps the kernels small and quick to compile.
template <class T, class Op, class LastOp>
__device__ __forceinline__ void foldWords(const uint4* const* p, int nsrc, uint4* d, uint4* d2,
                                          size_t n, size_t tid, size_t nthreads, Op op,
                                          LastOp last) {
  const uint4* firstSrc = p[0];
  const uint4* lastSrc = p[nsrc - 1];
  __builtin_assume(__isGlobal(firstSrc));
  __builtin_assume(__isGlobal(lastSrc));
  __builtin_assume(__isGlobal(d));
  size_t i = tid;
  for (; i + (kUnroll - 1) * nthreads < n; i += kUnroll * nthreads) {
    uint4 acc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc[u] = firstSrc[i + u * nthreads];
#pragma unroll 1
    for (int s = 1; s + 1 < nsrc; ++s) foldInto<T>(acc, p[s], i, nthreads, op);
    foldInto<T>(acc, lastSrc, i, nthreads, last);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[i + u * nthreads] = acc[u];
    if (d2 != nullptr) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) d2[i + u * nthreads] = acc[u];
    }
  }
  for (; i < n; i += nthreads) {
    uint4 acc = firstSrc[i];
#pragma unroll 1
    for (int s = 1; s + 1 < nsrc; ++s) acc = applyPack<T>(acc, p[s][i], op);
    acc = applyPack<T>(acc, lastSrc[i], last);
    d[i] = acc;
    if (d2 != nullptr) d2[i] = acc;
  }
}

/// Folds elements [from, to) one at a time.
template <class T, class Op, class LastOp>
__device__ __forceinline__ void foldRange(const T* const* p, int nsrc, T* dst, T* dst2, size_t from,
                                          size_t to, size_t tid, size_t nthreads, Op op,
                                          LastOp last) {
  for (size_t i = from + tid; i < to; i += nthreads) {
    T r = foldElement<T>(p, nsrc, i, op, last);
    dst[i] = r;
    if (dst2 != nullptr) dst2[i] = r;
  }
}

/// dst[i] (and dst2[i] when not null) = srcs[0][i] op ... op srcs[nsrc-1][i] for i < count,
/// with LastOp on the last step; threads tid of nthreads; 2 <= nsrc <= kMaxReduceSources.
template <class T, class Op, class LastOp>
__device__ __forceinline__ void reduceSlice(const T* const* srcs, int nsrc, T* dst, T* dst2,
                                            size_t count, size_t tid, size_t nthreads, Op op,
                                            LastOp last) {
  const T* p[kMaxReduceSources];
  uintptr_t diff =
      dst2 != nullptr ? reinterpret_cast<uintptr_t>(dst2) - reinterpret_cast<uintptr_t>(dst) : 0;
#pragma unroll
  for (int s = 0; s < kMaxReduceSources; ++s) {
    p[s] = s < nsrc ? srcs[s] : srcs[0];
    diff |= reinterpret_cast<uintptr_t>(p[s]) - reinterpret_cast<uintptr_t>(dst);
  }
  const WordSplit sp = wordSizeOfDiff(diff) == 16
                           ? splitWords(reinterpret_cast<uintptr_t>(dst), count, sizeof(T), 16)
                           : WordSplit{count, 0, 0};
  foldRange<T>(p, nsrc, dst, dst2, 0, sp.head, tid, nthreads, op, last);
  if (sp.words != 0) {
    const uint4* w[kMaxReduceSources];
#pragma unroll
    for (int s = 0; s < kMaxReduceSources; ++s)
      w[s] = reinterpret_cast<const uint4*>(p[s] + sp.head);
    foldWords<T>(w, nsrc, reinterpret_cast<uint4*>(dst + sp.head),
                 dst2 != nullptr ? reinterpret_cast<uint4*>(dst2 + sp.head) : nullptr, sp.words,
                 tid, nthreads, op, last);
  }
  const size_t tailFrom = sp.head + sp.words * (16 / sizeof(T));
  foldRange<T>(p, nsrc, dst, dst2, tailFrom, count, tid, nthreads, op, last);
}

}  // namespace grove::kernels::cuda::dev
