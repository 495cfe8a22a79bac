// The shares of a group's end run all at once (they may wait for each
// other), or, when a thread cannot be started, none of them does: each is
// cancelled and run() says so.
#include "core/concurrent_run.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/error.h"

namespace grove::core {
namespace {

TEST(Concurrent, PiecesThatWaitForEachOtherAllRunAtOnce) {
  constexpr size_t kPieces = 4;
  std::atomic<size_t> arrived{0};
  std::vector<int> metAll(kPieces, 0);
  EXPECT_TRUE(Concurrent(kPieces).run(
      [&](size_t i) {
        ++arrived;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (arrived.load() < kPieces && std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
        metAll[i] = arrived.load() == kPieces;
      },
      [&](size_t) { ADD_FAILURE() << "cancelled although every thread started"; }));
  EXPECT_EQ(metAll, std::vector<int>(kPieces, 1));
}

TEST(Concurrent, AThreadThatCannotStartCancelsEveryPiece) {
  constexpr size_t kPieces = 3;
  std::vector<int> ran(kPieces, 0), cancelled(kPieces, 0);
  EXPECT_FALSE(Concurrent(kPieces, /*threadLimit=*/1)
                   .run([&](size_t i) { ran[i] = 1; },
                        [&](size_t i) {
                          cancelled[i] = 1;
                          if (i == 2) throw std::runtime_error("a cancel that throws is ignored");
                        }))
      << "not cancelled although a thread could not start";
  EXPECT_EQ(ran, std::vector<int>(kPieces, 0));
  EXPECT_EQ(cancelled, std::vector<int>(kPieces, 1));
}

TEST(Concurrent, EveryPieceRunsAndTheFirstErrorIsRethrown) {
  std::vector<int> ran(3, 0);
  EXPECT_THROW(Concurrent(3).run(
                   [&](size_t i) {
                     ran[i] = 1;
                     if (i == 1) throw Error(groveInvalidUsage, "piece 1 failed");
                   },
                   [](size_t) {}),
               Error);
  EXPECT_EQ(ran, std::vector<int>(3, 1));
  EXPECT_TRUE(Concurrent(0).run([](size_t) { ADD_FAILURE(); }, [](size_t) { ADD_FAILURE(); }));
}

}  // namespace
}  // namespace grove::core
