// CUDA kernels' host side, without a GPU: argument validation of the launch
// API, the dtype dispatch table, the fold kinds, and the head/word/tail
// split the kernels use. Where no device is present, a valid launch must
// fail with groveUnhandledCudaError, never crash or pass silently.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "base/error.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/split.h"

namespace grove::kernels::cuda {
namespace {

using detail::checkCopyArgs;
using detail::checkReduceArgs;
using detail::ReduceKind;

alignas(64) unsigned char gArena[4096];

/// Runs f, expects grove::Error with `code` whose message contains `needle`.
template <class F>
void expectError(F f, groveResult_t code, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CudaKernelsApi, ReduceKindFollowsOpAndFinal) {
  EXPECT_EQ(detail::reduceKindFor(groveSum, false), ReduceKind::kSum);
  EXPECT_EQ(detail::reduceKindFor(groveSum, true), ReduceKind::kSum);
  EXPECT_EQ(detail::reduceKindFor(groveProd, true), ReduceKind::kProd);
  EXPECT_EQ(detail::reduceKindFor(groveMax, false), ReduceKind::kMax);
  EXPECT_EQ(detail::reduceKindFor(groveMin, false), ReduceKind::kMin);
  EXPECT_EQ(detail::reduceKindFor(groveAvg, false), ReduceKind::kSum);
  EXPECT_EQ(detail::reduceKindFor(groveAvg, true), ReduceKind::kAvgFinal);
  expectError([] { detail::reduceKindFor(static_cast<groveRedOp_t>(7), false); },
              groveInvalidArgument, "invalid op 7");
}

TEST(CudaKernelsApi, DispatchTableCoversEveryDtypeOnce) {
  std::set<detail::ReduceLauncher> seen;
  for (int t = 0; t < groveNumTypes; ++t) {
    detail::ReduceLauncher l = detail::reduceLauncher(static_cast<groveDataType_t>(t));
    ASSERT_NE(l, nullptr) << "dtype " << t;
    seen.insert(l);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(groveNumTypes));
  EXPECT_EQ(detail::reduceLauncher(groveNumTypes), nullptr);
  EXPECT_EQ(detail::reduceLauncher(static_cast<groveDataType_t>(-1)), nullptr);
  EXPECT_EQ(detail::reduceLauncher(groveFloat32), &detail::launchReduceFloat32);
  EXPECT_EQ(detail::reduceLauncher(groveBfloat16), &detail::launchReduceBfloat16);
  EXPECT_EQ(detail::reduceLauncher(groveUint8), &detail::launchReduceUint8);
}

TEST(CudaKernelsApi, ReduceRejectsBadArguments) {
  void* d = gArena;
  const void* s2[2] = {gArena + 1024, gArena + 2048};
  const auto bad = groveInvalidArgument;
  expectError(
      [&] {
        checkReduceArgs(static_cast<groveDataType_t>(10), groveSum, d, nullptr, s2, 2, 4, false, 1);
      },
      bad, "invalid data type 10");
  expectError(
      [&] {
        checkReduceArgs(groveFloat32, static_cast<groveRedOp_t>(5), d, nullptr, s2, 2, 4, false, 1);
      },
      bad, "invalid op 5");
  for (int n : {-1, 0, 1, kMaxReduceSources + 1}) {
    expectError([&] { checkReduceArgs(groveFloat32, groveSum, d, nullptr, s2, n, 4, false, 1); },
                bad, "needs 2 to 8 sources, got " + std::to_string(n));
  }
  expectError([&] { checkReduceArgs(groveFloat32, groveAvg, d, nullptr, s2, 2, 4, true, 0); }, bad,
              "avg needs nranks >= 1, got 0");
  expectError(
      [&] { checkReduceArgs(groveFloat32, groveSum, nullptr, nullptr, s2, 2, 4, false, 1); }, bad,
      "null destination with count > 0");
  const void* withNull[2] = {gArena, nullptr};
  expectError([&] { checkReduceArgs(groveInt8, groveSum, d, nullptr, withNull, 2, 1, false, 1); },
              bad, "null source 1 with count > 0");
  expectError([&] { checkReduceArgs(groveInt8, groveSum, d, nullptr, nullptr, 2, 1, false, 1); },
              bad, "null source array");
  const void* mis[2] = {gArena + 1026, gArena + 2048};
  expectError([&] { checkReduceArgs(groveInt32, groveSum, d, nullptr, mis, 2, 4, false, 1); }, bad,
              "source 0 is not aligned to the 4-byte int32 element");
  expectError(
      [&] { checkReduceArgs(groveFloat16, groveSum, gArena + 1, nullptr, s2, 2, 4, false, 1); },
      bad, "destination is not aligned to the 2-byte half element");
  const void* overlap[2] = {gArena + 8, gArena + 2048};
  expectError([&] { checkReduceArgs(groveFloat32, groveMax, d, nullptr, overlap, 2, 4, false, 1); },
              bad, "overlaps source 0 without being equal");
  expectError([&] { checkReduceArgs(groveFloat32, groveMax, d, gArena + 4, s2, 2, 4, false, 1); },
              bad, "the two destinations overlap");
  expectError(
      [&] { checkReduceArgs(groveUint64, groveSum, d, nullptr, s2, 2, SIZE_MAX / 4, false, 1); },
      bad, "overflows");
}

TEST(CudaKernelsApi, ReduceAcceptsInPlaceAndEmptyCalls) {
  const void* inPlace[3] = {gArena, gArena + 1024, gArena};
  EXPECT_NO_THROW(
      checkReduceArgs(groveFloat32, groveSum, gArena, gArena + 1024, inPlace, 3, 64, true, 1));
  EXPECT_NO_THROW(
      checkReduceArgs(groveFloat32, groveAvg, gArena, nullptr, inPlace, 2, 64, false, 0));
  const void* oddBytes[2] = {gArena + 513, gArena + 1027};  // int8 needs no alignment
  EXPECT_NO_THROW(
      checkReduceArgs(groveInt8, groveSum, gArena + 1, nullptr, oddBytes, 2, 3, false, 1));
  const void* nulls[2] = {nullptr, nullptr};
  EXPECT_NO_THROW(checkReduceArgs(groveFloat64, groveSum, nullptr, nullptr, nulls, 2, 0, false, 1));
  // Empty calls launch nothing, so they need no device.
  EXPECT_NO_THROW(reduceCopyAsync(groveBfloat16, groveProd, nullptr, nullptr, nullptr, nullptr, 0,
                                  false, 1, nullptr));
  EXPECT_NO_THROW(
      reduceMultiAsync(groveInt64, groveMin, nullptr, nullptr, nulls, 2, 0, false, 1, nullptr));
  EXPECT_NO_THROW(copyAsync(nullptr, nullptr, 0, nullptr));
  // ... but still check what they can.
  expectError(
      [&] {
        reduceMultiAsync(groveInt64, groveMin, nullptr, nullptr, nulls, 9, 0, false, 1, nullptr);
      },
      groveInvalidArgument, "needs 2 to 8 sources, got 9");
}

TEST(CudaKernelsApi, CopyRejectsBadArguments) {
  expectError([] { checkCopyArgs(nullptr, gArena, 1); }, groveInvalidArgument, "null destination");
  expectError([] { checkCopyArgs(gArena, nullptr, 1); }, groveInvalidArgument, "null source");
  expectError([] { checkCopyArgs(gArena + 1, gArena, 2); }, groveInvalidArgument, "overlap");
  expectError([] { checkCopyArgs(gArena, gArena + 15, 16); }, groveInvalidArgument, "overlap");
  EXPECT_NO_THROW(checkCopyArgs(gArena, gArena + 16, 16));
  EXPECT_NO_THROW(checkCopyArgs(gArena, gArena, 16));
  EXPECT_NO_THROW(copyAsync(gArena, gArena, 16, nullptr));  // dst == src: nothing to do
}

TEST(CudaKernelsApi, WordSizeIsTheLargestCommonAlignment) {
  uintptr_t same[3] = {0x1003, 0x2003, 0x5013};
  EXPECT_EQ(commonWordSize(same, 3), 16u);
  uintptr_t eight[2] = {0x1000, 0x2008};
  EXPECT_EQ(commonWordSize(eight, 2), 8u);
  uintptr_t four[3] = {0x1001, 0x2005, 0x3011};
  EXPECT_EQ(commonWordSize(four, 3), 4u);
  uintptr_t two[2] = {0x1000, 0x2002};
  EXPECT_EQ(commonWordSize(two, 2), 2u);
  uintptr_t one[2] = {0x1000, 0x2001};
  EXPECT_EQ(commonWordSize(one, 2), 1u);
  EXPECT_EQ(commonWordSize(one, 1), 16u);
}

TEST(CudaKernelsApi, SplitCoversEveryElementOnce) {
  for (size_t esz : {1, 2, 4, 8}) {
    for (size_t word : {2, 4, 8, 16}) {
      for (uintptr_t addr = 0x1000; addr < 0x1000 + 32; addr += esz) {
        for (size_t count = 0; count < 80; ++count) {
          WordSplit sp = splitWords(addr, count, esz, word);
          SCOPED_TRACE("esz " + std::to_string(esz) + " word " + std::to_string(word) + " addr " +
                       std::to_string(addr % 32) + " count " + std::to_string(count));
          if (word <= esz) {
            EXPECT_EQ(sp.head, count);
            continue;
          }
          const size_t per = word / esz;
          ASSERT_EQ(sp.head + sp.words * per + sp.tail, count);
          if (sp.words > 0) {
            EXPECT_EQ((addr + sp.head * esz) % word, 0u);
            EXPECT_LT(sp.head, per);
            EXPECT_LT(sp.tail, per);
          } else {
            EXPECT_LT(sp.head + sp.tail, count < 2 * per ? count + 1 : 2 * per);
          }
        }
      }
    }
  }
  // Pointers misaligned to the element: everything is head (element by element).
  WordSplit sp = splitWords(0x1001, 100, 4, 16);
  EXPECT_EQ(sp.head, 100u);
  EXPECT_EQ(sp.words, 0u);
}

// Grids: never more than resident, whole rounds for every block, as few
// rounds as possible, unless that costs more than a quarter of the grid; a
// 16 MiB reduce on 132 SMs x 2 blocks (32 KiB a block and round) becomes
// 256 blocks of exactly 2 rounds instead of 264 of 1.94.
TEST(CudaKernelsApi, GridsRunWholeRounds) {
  const size_t per = 32 << 10;
  EXPECT_EQ(balancedBlocks(16 << 20, per, 264), 256u);
  EXPECT_EQ(balancedBlocks(0, per, 264), 1u);
  EXPECT_EQ(balancedBlocks(1, per, 264), 1u);
  EXPECT_EQ(balancedBlocks(100 * per, per, 264), 100u);  // fits: one round, a block per unit
  EXPECT_EQ(balancedBlocks(264 * per, per, 264), 264u);
  EXPECT_EQ(balancedBlocks(265 * per, per, 264), 264u);  // 133 would halve the grid
  EXPECT_EQ(balancedBlocks(400 * per, per, 264), 200u);  // two whole rounds, 3/4 of the grid
  for (size_t units : {size_t{1} << 20, size_t{3} << 20, size_t{16} << 20, size_t{17} << 20,
                       size_t{100} << 20, size_t{1} << 30})
    for (unsigned most : {1u, 7u, 108u, 264u, 528u}) {
      const unsigned b = balancedBlocks(units, per, most);
      const size_t blockRounds = (units + per - 1) / per;
      const size_t rounds = (blockRounds + most - 1) / most;  // the fewest possible
      SCOPED_TRACE(std::to_string(units) + " units, " + std::to_string(most) + " blocks at most");
      EXPECT_GE(b, 1u);
      EXPECT_LE(b, most);
      EXPECT_GE(static_cast<size_t>(b) * rounds, blockRounds);  // covered in `rounds` rounds
      if (b != most) {
        EXPECT_LT(static_cast<size_t>(b - 1) * rounds, blockRounds);  // no block more
      }
      if (rounds > 1) {
        EXPECT_GE(static_cast<size_t>(b) * 4, static_cast<size_t>(most) * 3)
            << "the grid lost more than a quarter";
      }
    }
}

TEST(CudaKernelsApi, LaunchWithoutDeviceIsACudaError) {
  const int n = deviceCount();
  EXPECT_GE(n, 0);
  if (n > 0) GTEST_SKIP() << "a CUDA device is present; the GPU tier covers real launches";
  const void* srcs[2] = {gArena + 1024, gArena + 2048};
  expectError(
      [&] {
        reduceMultiAsync(groveFloat32, groveSum, gArena, nullptr, srcs, 2, 16, false, 1, nullptr);
      },
      groveUnhandledCudaError, "kernels::cuda");
  expectError([&] { copyAsync(gArena, gArena + 1024, 64, nullptr); }, groveUnhandledCudaError,
              "kernels::cuda");
}

}  // namespace
}  // namespace grove::kernels::cuda
