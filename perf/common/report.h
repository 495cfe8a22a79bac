// Text of the perf binaries' output, in nccl-tests' exact layout: the
// parameter header, the device lines, the two-group column header
// (out-of-place, in-place), one row per size, and the summary.
#pragma once

#include <cstddef>
#include <string>

#include "perf/common/perf_args.h"

namespace grove::perf {

/// "# nThread 1 nGpus 1 minBytes ... validation: 1 graph: 0" and the lines after it.
std::string formatParamHeader(const PerfArgs& args);

/// One "#  Rank  0 Group  0 Pid   1234 on       host device  0 [host] CPU" line.
std::string formatDeviceLine(int rank, int pid, const std::string& host, int device);

/// The same line with another device label in place of "[host] CPU" (for a
/// CUDA device nccl-tests' "[0x<pci bus id>] <device name>").
std::string formatDeviceLine(int rank, int pid, const std::string& host, int device,
                             const std::string& label);

/// The three column-header lines ("time" or "cputime" as timeName).
std::string formatColumnHeader(const char* timeName);

/// The left part of a row: size, count, type, redop, root.
std::string formatRowParams(size_t bytes, size_t count, const char* typeName, const char* opName,
                            int root);

/// Time in microseconds as nccl-tests prints it (%7.0f, %7.1f or %7.2f).
std::string formatTime(double usec);

/// One result group: time, algbw, busbw, #wrong (wrong < 0 prints N/A).
std::string formatResult(double usec, double algBw, double busBw, long wrong);

/// The result group of a variant that is not measured (all N/A).
std::string formatSkippedResult();

/// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X".
std::string formatSummary(long errors, double avgBusBw);

}  // namespace grove::perf
