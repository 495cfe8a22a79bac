// work.cc - GroveWork and OpQueue (see work.h for how they fit together).
#include "work.h"

#include <ATen/core/jit_type.h>

#include <atomic>
#include <stdexcept>

namespace grove::pytorch {

namespace {
// How long the idle worker sleeps before it looks at the stop flag again.
constexpr auto kIdlePoll = std::chrono::milliseconds(200);

void runPlain(const std::function<void()>& fn) { fn(); }
std::atomic<BlockingScope> blockingScope{&runPlain};
}  // namespace

void setBlockingScope(BlockingScope scope) { blockingScope.store(scope ? scope : &runPlain); }

void runBlocking(const std::function<void()>& fn) { blockingScope.load()(fn); }

GroveWork::GroveWork(int rank, ::c10d::OpType type, const char* name,
                     std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout,
                     std::shared_ptr<SharedComm> comm, const char* profilingTitle,
                     const std::vector<at::Tensor>& inputs)
    : ::c10d::Work(rank, type, profilingTitle, std::optional<std::vector<at::Tensor>>(inputs)),
      name_(name),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      comm_(std::move(comm)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool GroveWork::wait(std::chrono::milliseconds timeout) {
  auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  if (!completesWithin(limit)) {
    // gloo's wording ("Timed out"), which callers match on
    std::string why = std::string(name_) + ": Timed out after " + std::to_string(limit.count()) +
                      " ms (the operation's timeout)";
    comm_->abort(why);
    TORCH_CHECK(false, "grove: ", why,
                "; the communicator was aborted (every rank's pending "
                "and later operations on this process group fail)");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

bool GroveWork::completesWithin(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  // The limit bounds the operation, not its future's callbacks: once the
  // operation ended, the callbacks (user code on the worker thread) run to
  // their end before the Work completes. A callback that waits on its own
  // Work is on the worker thread and returns once the operation ended.
  if (!cv_.wait_for(lock, limit, [&] { return ended_; })) return false;
  if (std::this_thread::get_id() != completer_) cv_.wait(lock, [&] { return completed_; });
  return true;
}

std::vector<at::Tensor> GroveWork::result() { return outputs_; }

int GroveWork::sourceRank() const {
  const int source = source_.load();
  TORCH_CHECK(source >= 0, "grove: sourceRank() is known once a recv has completed (", name_, ")");
  return source;
}

c10::intrusive_ptr<c10::ivalue::Future> GroveWork::getFuture() { return future_; }

void GroveWork::abort() { comm_->abort(std::string(name_) + ": Work.abort() was called"); }

void GroveWork::complete(std::exception_ptr error) {
  // The future first (its callbacks run here), then the Work: once wait()
  // returns, the future is complete and a then() added afterwards runs at
  // once on the caller's thread, as with gloo (torchft's managed Work
  // builds its callback chain on exactly that).
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    completer_ = std::this_thread::get_id();
    exception_ = error;
  }
  cv_.notify_all();
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

OpQueue::OpQueue() : state_(std::make_shared<State>()), thread_(&OpQueue::loop, state_) {}

OpQueue::~OpQueue() { stop(); }

void OpQueue::push(c10::intrusive_ptr<GroveWork> work, Task job) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->stopping) {
      state_->queue.push_back(Entry{std::move(work), std::move(job)});
      state_->cv.notify_one();
      return;
    }
  }
  work->complete(std::make_exception_ptr(std::runtime_error(
      std::string("grove: ") + work->name() + " after the process group was shut down")));
}

void OpQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    state_->cv.notify_all();
  }
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    // The last reference went from a future callback on the worker itself:
    // it finishes the queue and exits on its own (it shares state_).
    thread_.detach();
    return;
  }
  // The last reference to a process group may go while the GIL is held
  // (e.g. from DDP's reducer); the worker may need the GIL to free a tensor.
  runBlocking([this] { thread_.join(); });
}

void OpQueue::loop(std::shared_ptr<State> state) {
  for (;;) {
    Entry entry;
    {
      std::unique_lock<std::mutex> lock(state->mu);
      while (state->queue.empty() && !state->stopping) state->cv.wait_for(lock, kIdlePoll);
      if (state->queue.empty()) return;  // stopping, and nothing left to run
      entry = std::move(state->queue.front());
      state->queue.pop_front();
    }
    std::exception_ptr error;
    try {
      entry.job();
    } catch (...) {
      error = std::current_exception();
    }
    // Release the job (and the tensors it holds) before waking waiters.
    entry.job = nullptr;
    entry.work->complete(error);
  }
}

}  // namespace grove::pytorch
