#include "core/host_stream.h"

#include "base/error.h"

namespace grove::core {

HostStream::HostStream() : worker_([this] { workerLoop(); }) {}

HostStream::~HostStream() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !running_; });
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void HostStream::enqueue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void HostStream::workerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    groveResult_t code = groveSuccess;
    std::string text;
    try {
      work();
    } catch (const Error& e) {
      code = e.code();
      text = e.what();
    } catch (const std::bad_alloc&) {
      code = groveSystemError;
      text = "out of memory";
    } catch (const std::exception& e) {
      code = groveInternalError;
      text = e.what();
    }
    work = nullptr;  // what it held (a destroyed communicator's last reference) goes unlocked
    lock.lock();
    running_ = false;
    if (code != groveSuccess && error_ == groveSuccess) {
      error_ = code;
      errorText_ = text;
    }
    cv_.notify_all();
  }
}

groveResult_t HostStream::takeError(std::string* message) {
  groveResult_t e = error_;
  if (message != nullptr) *message = errorText_;
  error_ = groveSuccess;
  errorText_.clear();
  return e;
}

groveResult_t HostStream::synchronize(std::string* message) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !running_; });
  return takeError(message);
}

groveResult_t HostStream::query(std::string* message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!queue_.empty() || running_) return groveInProgress;
  return takeError(message);
}

}  // namespace grove::core
