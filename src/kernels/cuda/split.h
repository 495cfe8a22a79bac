// How a kernel splits a range into a scalar head, a body of aligned words
// and a scalar tail. Shared by the device code and the host (so the unit
// tests check the same arithmetic the kernels use).
//
// How it works: a word of W bytes (16 = one uint4) can only be loaded from
// every pointer at once if all pointers sit at the same offset modulo W.
// commonWordSize() finds the largest such W (16, 8, 4, 2 or 1). The head is
// the elements before the first W-aligned address (as few as possible), the
// body is whole words, and the tail is the elements left over. When the
// element size does not divide the head (pointers misaligned to the
// element), the whole range is head: the caller runs it element by element.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define GROVE_SPLIT_FN __host__ __device__ __forceinline__
#else
#define GROVE_SPLIT_FN inline
#endif

namespace grove::kernels::cuda {

/// A range split into head elements, body words and tail elements.
struct WordSplit {
  size_t head;   ///< elements before the body
  size_t words;  ///< whole words of the body
  size_t tail;   ///< elements after the body
};

/// Largest W in {16, 8, 4, 2, 1} dividing `diff` (the OR of pointer differences).
GROVE_SPLIT_FN unsigned wordSizeOfDiff(uintptr_t diff) {
  unsigned w = 16;
  while (w > 1 && (diff & (w - 1)) != 0) w >>= 1;
  return w;
}

/// Largest W in {16, 8, 4, 2, 1} with every ptrs[i] at the same offset modulo W.
GROVE_SPLIT_FN unsigned commonWordSize(const uintptr_t* ptrs, int n) {
  uintptr_t diff = 0;
  for (int i = 1; i < n; ++i) diff |= ptrs[i] - ptrs[0];
  return wordSizeOfDiff(diff);
}

/// Splits `count` elements of `elemSize` bytes starting at `first` into head, words
/// of `wordSize` bytes (a multiple of elemSize) and tail.
GROVE_SPLIT_FN WordSplit splitWords(uintptr_t first, size_t count, size_t elemSize,
                                    size_t wordSize) {
  size_t headBytes = (wordSize - first % wordSize) % wordSize;
  if (wordSize <= elemSize || headBytes % elemSize != 0) return WordSplit{count, 0, 0};
  size_t head = headBytes / elemSize;
  if (head >= count) return WordSplit{count, 0, 0};
  size_t perWord = wordSize / elemSize;
  size_t words = (count - head) / perWord;
  return WordSplit{head, words, count - head - words * perWord};
}

/// Blocks for `units` of work, `perBlock` per block per round (a round: every
/// thread of the grid moves its kUnroll words once), at most `most` blocks:
/// as few rounds as `most` allows, then as few blocks as give every block
/// the same number of whole rounds -- unless that would drop more than a
/// quarter of `most` (265 block-rounds over 264 blocks would become 133
/// blocks: half the memory parallelism), then `most`. A grid capped at
/// `most` alone leaves a last, partial round in which most threads fall
/// back to one word per iteration (a dependent memory round trip each),
/// which a kernel of a few rounds -- a 16 MiB reduce on a GPU of 132 SMs
/// runs 1.94 -- waits on. At least 1.
GROVE_SPLIT_FN unsigned balancedBlocks(size_t units, size_t perBlock, unsigned most) {
  if (perBlock == 0) perBlock = 1;
  if (most == 0) most = 1;
  const size_t blockRounds = (units + perBlock - 1) / perBlock;  // rounds of one block
  if (blockRounds == 0) return 1;
  if (blockRounds <= most) return static_cast<unsigned>(blockRounds);  // one round: a block a unit
  const size_t rounds = (blockRounds + most - 1) / most;
  const size_t balanced = (blockRounds + rounds - 1) / rounds;
  return balanced * 4 < static_cast<size_t>(most) * 3 ? most : static_cast<unsigned>(balanced);
}

}  // namespace grove::kernels::cuda
