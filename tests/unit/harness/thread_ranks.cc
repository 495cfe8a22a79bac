// Thread ranks over the loopback transport (see thread_ranks.h).
#include "unit/harness/thread_ranks.h"

#include <unistd.h>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "transports/loopback/loopback_transport.h"

namespace grove::harness {

ThreadRank::ThreadRank(int rank, int nranks, const std::string& jobId,
                       const ThreadRanksOptions& options, const WaitContext& wait)
    : rank_(rank), nranks_(nranks), wait_(wait) {
  context_.rank = rank;
  context_.nranks = nranks;
  context_.jobId = jobId;
  context_.bufferBytes = options.bufferBytes;
  context_.wait = wait;
}

void ThreadRank::establish(const std::vector<transport::LinkKey>& sends,
                           const std::vector<transport::LinkKey>& recvs) {
  std::vector<transport::LinkKey> newSends, newRecvs;
  for (const auto& k : sends) {
    if (!links_.hasSend(k)) newSends.push_back(k);
  }
  for (const auto& k : recvs) {
    if (!links_.hasRecv(k)) newRecvs.push_back(k);
  }
  transport::LoopbackTransport transport(context_);
  std::vector<std::unique_ptr<transport::SendHalf>> outSends;
  std::vector<std::unique_ptr<transport::RecvHalf>> outRecvs;
  transport.establish(newSends, newRecvs, outSends, outRecvs);
  for (size_t i = 0; i < newSends.size(); ++i) links_.addSend(newSends[i], std::move(outSends[i]));
  for (size_t i = 0; i < newRecvs.size(); ++i) links_.addRecv(newRecvs[i], std::move(outRecvs[i]));
}

void ThreadRank::establishFor(const plan::Program& program) {
  std::vector<transport::LinkKey> sends, recvs;
  exec::collectLinks(program, sends, recvs);
  establish(sends, recvs);
}

void ThreadRank::run(const plan::Program& program, const exec::Buffers& buffers,
                     const exec::ReduceSpec& spec) {
  establishFor(program);
  exec::runProgram(program, buffers, spec, links_, wait_);
}

std::string newJobId() {
  static std::atomic<uint64_t> counter{0};
  return "thread-ranks-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

void runOnThreadRanks(int nranks, const ThreadRanksOptions& options,
                      const std::function<void(ThreadRank&)>& body) {
  if (nranks < 1) throwInvalidArgument("runOnThreadRanks: nranks must be >= 1");
  AbortSignal ownSignal;
  AbortSignal& signal = options.abort != nullptr ? *options.abort : ownSignal;
  WaitContext wait = WaitContext::of(signal, options.timeoutSec);
  std::string jobId = newJobId();

  std::vector<std::unique_ptr<ThreadRank>> ranks;
  for (int r = 0; r < nranks; ++r) {
    ranks.push_back(std::make_unique<ThreadRank>(r, nranks, jobId, options, wait));
  }
  std::mutex errorMutex;
  std::exception_ptr firstError;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*ranks[r]);
      } catch (...) {
        std::string why = "rank " + std::to_string(r) + " failed";
        try {
          throw;
        } catch (const std::exception& e) {
          why += std::string(": ") + e.what();
        } catch (...) {}
        {
          std::lock_guard<std::mutex> lock(errorMutex);
          if (!firstError) firstError = std::current_exception();
        }
        signal.raise(why);
      }
    });
  }
  for (auto& t : threads) t.join();
  ranks.clear();  // links close only after every rank is done
  if (firstError) std::rethrow_exception(firstError);
}

void runProgramsOnThreads(const std::vector<plan::Program>& programs,
                          const std::vector<exec::Buffers>& buffers, const exec::ReduceSpec& spec,
                          size_t bufferBytes, double timeoutSec, AbortSignal* abort) {
  if (buffers.size() != programs.size()) {
    throwInvalidArgument("runProgramsOnThreads: one Buffers per program needed");
  }
  ThreadRanksOptions options;
  options.bufferBytes = bufferBytes;
  options.timeoutSec = timeoutSec;
  options.abort = abort;
  runOnThreadRanks(static_cast<int>(programs.size()), options, [&](ThreadRank& rank) {
    rank.run(programs[rank.rank()], buffers[rank.rank()], spec);
  });
}

}  // namespace grove::harness
