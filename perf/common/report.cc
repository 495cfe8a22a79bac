#include "perf/common/report.h"

#include <cstdarg>
#include <cstdio>

namespace grove::perf {
namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

std::string formatParamHeader(const PerfArgs& a) {
  std::string s = format(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d\n",
      a.nThreads, a.nGpus, a.minBytes, a.maxBytes, a.stepFactor > 1 ? a.stepFactor : a.stepBytes,
      a.stepFactor > 1 ? "factor" : "bytes", a.warmupIters, a.iters, a.aggIters, a.check,
      a.cudaGraph);
  if (a.blocking) s += "# Blocking Enabled: NULL stream, each call waits for completion \n";
  if (a.parallelInit)
    s += "# Parallel Init Enabled: threads call into groveCommInitRank concurrently \n";
  s += "#\n";
  return s;
}

std::string formatDeviceLine(int rank, int pid, const std::string& host, int device) {
  return formatDeviceLine(rank, pid, host, device, "[host] CPU");
}

std::string formatDeviceLine(int rank, int pid, const std::string& host, int device,
                             const std::string& label) {
  return format("#  Rank %2d Group %2d Pid %6d on %10s device %2d %s\n", rank, 0, pid, host.c_str(),
                device, label.c_str());
}

std::string formatColumnHeader(const char* timeName) {
  std::string s = format(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  s += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
              "count", "type", "redop", "root", timeName, "algbw", "busbw", "#wrong", timeName,
              "algbw", "busbw", "#wrong");
  s += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
  return s;
}

std::string formatRowParams(size_t bytes, size_t count, const char* typeName, const char* opName,
                            int root) {
  return format("%12zu  %12zu  %8s  %6s  %6i", bytes, count, typeName, opName, root);
}

std::string formatTime(double usec) {
  if (usec >= 10000.0) return format("%7.0f", usec);
  if (usec >= 100.0) return format("%7.1f", usec);
  return format("%7.2f", usec);
}

std::string formatResult(double usec, double algBw, double busBw, long wrong) {
  std::string t = formatTime(usec);
  if (wrong < 0) return format("  %7s  %6.2f  %6.2f  %5s", t.c_str(), algBw, busBw, "N/A");
  return format("  %7s  %6.2f  %6.2f  %5li", t.c_str(), algBw, busBw, wrong);
}

std::string formatSkippedResult() {
  return format("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
}

std::string formatSummary(long errors, double avgBusBw) {
  return format("# Out of bounds values : %li %s\n# Avg bus bandwidth    : %g \n#\n", errors,
                errors ? "FAILED" : "OK", avgBusBw);
}

}  // namespace grove::perf
