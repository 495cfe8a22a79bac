#include "sgd_trainer/grad_sync.h"

#include <algorithm>
#include <chrono>

namespace grove::examples {

void checkGrove(groveResult_t r, groveComm_t comm, const std::string& what) {
  if (r == groveSuccess) return;
  const std::string detail = groveGetLastError(comm);
  throw TrainerError(what + " failed: " + groveGetErrorString(r) +
                     (detail.empty() ? "" : ": " + detail));
}

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

GradSync::GradSync(groveComm_t comm, float* grads, std::vector<Bucket> buckets, bool overlap,
                   double timeoutSec)
    : comm_(comm),
      grads_(grads),
      buckets_(std::move(buckets)),
      overlap_(overlap),
      timeoutSec_(timeoutSec),
      issueAt_(buckets_.size()),
      doneAt_(buckets_.size()) {
  if (buckets_.empty()) throw TrainerError("GradSync: no buckets");
  checkGrove(groveHostStreamCreate(&stream_), nullptr, "groveHostStreamCreate");
  watcher_ = std::thread([this] { watcherLoop(); });
}

GradSync::~GradSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  watcher_.join();
  groveHostStreamDestroy(stream_);  // waits for anything still queued
}

void GradSync::beginStep() {
  std::lock_guard<std::mutex> lock(mu_);
  issued_ = confirmed_ = 0;
}

void GradSync::issue(size_t k) {
  const Bucket& b = buckets_[k];
  const double t = nowSec();
  checkGrove(groveAllReduce(grads_ + b.offset, grads_ + b.offset, b.count, groveFloat32, groveAvg,
                            comm_, stream_),
             comm_, "groveAllReduce of gradient bucket " + std::to_string(k));
  {
    std::lock_guard<std::mutex> lock(mu_);
    issueAt_[k] = t;
    ++issued_;
  }
  cv_.notify_all();
}

void GradSync::layerDone(int layer) {
  if (!overlap_) return;
  // Buckets are ordered last layers first, so the ready ones form a prefix.
  size_t next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    next = issued_;
  }
  for (; next < buckets_.size() && buckets_[next].lowestLayer >= layer; ++next) issue(next);
}

void GradSync::watcherLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || issued_ > confirmed_; });
    if (issued_ == confirmed_) return;  // stop_ and nothing outstanding
    const size_t upTo = issued_;
    lock.unlock();
    // Returns once everything queued so far has run, at least buckets < upTo.
    const groveResult_t r = groveHostStreamSynchronize(stream_);
    const double t = nowSec();
    const std::string text = r == groveSuccess ? "" : groveGetLastError(comm_);
    lock.lock();
    if (r != groveSuccess && error_ == groveSuccess) {
      error_ = r;
      errorText_ = text;
    }
    for (size_t k = confirmed_; k < upTo; ++k) doneAt_[k] = t;
    confirmed_ = upTo;
    cv_.notify_all();
  }
}

SyncTimes GradSync::finish() {
  const double backwardEnd = nowSec();
  size_t next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    next = issued_;
  }
  for (; next < buckets_.size(); ++next) issue(next);  // no overlap, or buckets not reported

  std::unique_lock<std::mutex> lock(mu_);
  const bool done = cv_.wait_for(lock, std::chrono::duration<double>(timeoutSec_), [&] {
    return confirmed_ == buckets_.size() || error_ != groveSuccess;
  });
  if (error_ != groveSuccess)
    throw TrainerError(std::string("gradient all-reduce failed: ") + groveGetErrorString(error_) +
                       ": " + errorText_);
  if (!done)
    throw TrainerError("gradient all-reduce did not finish within " + std::to_string(timeoutSec_) +
                       " s (" + std::to_string(confirmed_) + " of " +
                       std::to_string(buckets_.size()) + " buckets done)");
  SyncTimes t;
  t.exposed = nowSec() - backwardEnd;
  // Union of the [issue, done] intervals (issue times increase).
  double spanStart = issueAt_[0], spanEnd = doneAt_[0];
  for (size_t k = 1; k < buckets_.size(); ++k) {
    if (issueAt_[k] > spanEnd) {
      t.inFlight += spanEnd - spanStart;
      spanStart = issueAt_[k];
    }
    spanEnd = std::max(spanEnd, doneAt_[k]);
  }
  t.inFlight += spanEnd - spanStart;
  return t;
}

}  // namespace grove::examples
