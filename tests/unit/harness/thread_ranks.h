// Thread ranks: run N ranks as threads of the test process, connected by the
// loopback transport, to check schedules and the host executor end to end.
//
// Two levels:
//   runProgramsOnThreads(programs, buffers, spec)  -- the common case: one
//     program per rank, links made from the programs (exec::collectLinks),
//     each rank's program run on its own thread.
//   runOnThreadRanks(nranks, options, body)        -- the general case: body
//     runs on each rank's thread with a ThreadRank that can establish links
//     and run several programs over the same links.
//
// Every call uses a fresh job id, so calls never share rings. The first
// error any rank throws is rethrown by the calling thread after all ranks
// have stopped; when a rank fails, the others are aborted (through the
// shared AbortSignal) so they stop at once instead of waiting for their
// timeout.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "base/wait.h"
#include "exec/host_executor.h"
#include "ir/schedule.h"
#include "transports/transport.h"

namespace grove::harness {

/// Knobs of runOnThreadRanks / runProgramsOnThreads.
struct ThreadRanksOptions {
  size_t bufferBytes = 64 << 10;  ///< capacity of each link's ring
  double timeoutSec = 10.0;       ///< wait timeout of every rank (time without progress)
  /// Abort signal the ranks watch; null = one made per call. Raising it from
  /// another thread makes every rank's wait throw. A failing rank raises it.
  AbortSignal* abort = nullptr;
};

/// One rank's view inside runOnThreadRanks.
class ThreadRank {
 public:
  /// This rank.
  int rank() const { return rank_; }
  /// The number of ranks.
  int nranks() const { return nranks_; }
  /// Wait context (abort flag + timeout) to pass to exec::runProgram.
  const WaitContext& wait() const { return wait_; }
  /// The links established so far (persist across programs, with their positions).
  exec::MapLinkTable& links() { return links_; }
  /// Establishes the given halves over loopback (skips ones already present).
  void establish(const std::vector<transport::LinkKey>& sends,
                 const std::vector<transport::LinkKey>& recvs);
  /// Establishes every link `program` uses (collectLinks + establish).
  void establishFor(const plan::Program& program);
  /// establishFor(program), then exec::runProgram on this rank's links.
  void run(const plan::Program& program, const exec::Buffers& buffers,
           const exec::ReduceSpec& spec);

  /// Made by runOnThreadRanks only.
  ThreadRank(int rank, int nranks, const std::string& jobId, const ThreadRanksOptions& options,
             const WaitContext& wait);

 private:
  int rank_;
  int nranks_;
  WaitContext wait_;
  transport::Context context_;
  exec::MapLinkTable links_;
};

/// A job id never used before in this process ("thread-ranks-<pid>-<n>").
std::string newJobId();

/// Runs body(rank) on nranks threads, one per rank; rethrows the first error.
/// The ranks' links live until every thread has finished.
void runOnThreadRanks(int nranks, const ThreadRanksOptions& options,
                      const std::function<void(ThreadRank&)>& body);

/// Runs programs[r] with buffers[r] on rank r's thread (nranks = programs.size()),
/// over loopback links of bufferBytes each; rethrows the first error.
void runProgramsOnThreads(const std::vector<plan::Program>& programs,
                          const std::vector<exec::Buffers>& buffers, const exec::ReduceSpec& spec,
                          size_t bufferBytes = 64 << 10, double timeoutSec = 10.0,
                          AbortSignal* abort = nullptr);

}  // namespace grove::harness
