// The sequencer runs a communicator's operations in issue order whichever
// thread runs them, and never leaves a ticket unfinished: not when its work
// throws, and not when queuing the work fails after the ticket was taken.
#include "core/sequencer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

namespace grove::core {
namespace {

// True if fn returns within `seconds`. It runs on a detached thread, so a
// call that never returns fails the test instead of hanging it; what fn uses
// must then outlive the test (shared_ptr captures).
bool returnsWithin(double seconds, std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  std::thread([fn = std::move(fn), done] {
    fn();
    done->set_value();
  }).detach();
  return f.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
}

TEST(Sequencer, TicketsRunInIssueOrderWhicheverThreadRunsThem) {
  Sequencer seq;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 8; ++i) tickets.push_back(seq.issue());
  std::mutex mu;
  std::vector<uint64_t> order;
  std::vector<std::thread> threads;
  for (int i = 7; i >= 0; --i)  // started last ticket first
    threads.emplace_back([&, t = tickets[i]] {
      seq.run(t, [&] {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(t);
      });
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, tickets);
}

TEST(Sequencer, WorkThatThrowsStillFinishesItsTicket) {
  auto seq = std::make_shared<Sequencer>();
  EXPECT_THROW(seq->runNow([] { throw std::runtime_error("failed"); }), std::runtime_error);
  EXPECT_TRUE(returnsWithin(5.0, [seq] { seq->runNow([] {}); }));
}

TEST(Sequencer, AQueueThatFailsFinishesItsTicketAsANoOp) {
  auto seq = std::make_shared<Sequencer>();
  EXPECT_THROW(seq->issueAndQueue([](uint64_t) { throw std::bad_alloc(); }), std::bad_alloc);
  // The failed ticket does not hold back the calls behind it.
  EXPECT_TRUE(returnsWithin(5.0, [seq] { seq->runNow([] {}); }))
      << "a call waited for a ticket whose work was never queued";
  EXPECT_TRUE(seq->drainFor(1.0));
}

TEST(Sequencer, AFailedQueueBehindQueuedWorkWaitsItsTurn) {
  Sequencer seq;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::thread worker;
  seq.issueAndQueue([&](uint64_t t) {
    worker = std::thread([&seq, t, released] { seq.run(t, [&] { released.wait(); }); });
  });
  // The failing queue's no-op ticket waits for the queued work ahead of it.
  auto failing = std::async(std::launch::async, [&] {
    EXPECT_THROW(seq.issueAndQueue([](uint64_t) { throw std::bad_alloc(); }), std::bad_alloc);
  });
  EXPECT_EQ(failing.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  release.set_value();
  worker.join();
  EXPECT_EQ(failing.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(seq.drainFor(1.0));
}

}  // namespace
}  // namespace grove::core
