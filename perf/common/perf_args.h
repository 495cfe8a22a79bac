// Command-line options of the perf binaries, parsed as nccl-tests parses them.
//
// Every flag of nccl-tests' common.cu is accepted with the same letters, long
// names and defaults where they make sense for host memory; the one deliberate
// difference is -z (blocking), which defaults to 1 here: collectives take the
// NULL stream and block, while -z 0 queues them on a groveHostStream_t and
// synchronizes at the end of each timed loop. Parsing is a pure function so
// tests can check it without a communicator.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "grove/grove.h"

namespace grove::perf {

/// How the time of one size is combined across ranks (-a).
enum class AverageMode : int { kRank0 = 0, kAvg = 1, kMin = 2, kMax = 3 };

/// Every option of a perf binary.
struct PerfArgs {
  int nThreads = 1;             ///< -t: ranks run as threads of this process
  int nGpus = 1;                ///< -g: devices per thread (host memory: 1 only)
  size_t minBytes = 32u << 20;  ///< -b
  size_t maxBytes = 32u << 20;  ///< -e
  size_t stepBytes = 1u << 20;  ///< -i
  size_t stepFactor = 1;        ///< -f (>1: multiply instead of add)
  int iters = 20;               ///< -n
  int warmupIters = 5;          ///< -w
  int aggIters = 1;             ///< -m: calls aggregated in one group per iteration
  int check = 1;                ///< -c: data-check iterations (0 = no check)
  int parallelInit = 0;         ///< -p
  int blocking = 1;             ///< -z: 1 = NULL stream, 0 = host stream
  int streamNull = 0;           ///< -y: accepted for compatibility
  int timeoutSec = 0;           ///< -T: per-wait timeout handed to the communicator
  int cudaGraph = 0;            ///< -G: accepted, ignored for host memory
  int reportCpuTime = 0;        ///< -C: report the time to enqueue instead of to complete
  AverageMode average = AverageMode::kAvg;           ///< -a
  std::vector<groveRedOp_t> ops{groveSum};           ///< -o (all: every op)
  std::vector<groveDataType_t> types{groveFloat32};  ///< -d (all: every type)
  bool opAll = false;                                ///< -o all was given
  bool typeAll = false;                              ///< -d all was given
  int root = 0;                                      ///< -r; -1 = every root
  std::string outputFile;                            ///< -F: CSV output (not supported yet)
};

/// Result of parsing.
enum class ParseStatus { kRun, kHelp, kError };

/// Parses argv (argv[0] is the program). On kError, *error says why; on kHelp
/// the caller prints usage(). Never prints and never exits.
ParseStatus parsePerfArgs(int argc, char* const* argv, PerfArgs* args, std::string* error);

/// Parses a byte size as nccl-tests does: a number with an optional K, M or G
/// suffix (binary multiples). Returns a negative value for bad text.
double parsePerfSize(const char* text);

/// The usage text (nccl-tests' wording) for program `prog`.
std::string perfUsage(const std::string& prog);

/// The sizes a run visits: minBytes, then *stepFactor or +stepBytes up to maxBytes.
std::vector<size_t> perfSizes(const PerfArgs& args);

}  // namespace grove::perf
