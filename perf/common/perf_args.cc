#include "perf/common/perf_args.h"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/dtype.h"

namespace grove::perf {
namespace {

const option kLongOpts[] = {{"nthreads", required_argument, nullptr, 't'},
                            {"ngpus", required_argument, nullptr, 'g'},
                            {"minbytes", required_argument, nullptr, 'b'},
                            {"maxbytes", required_argument, nullptr, 'e'},
                            {"stepbytes", required_argument, nullptr, 'i'},
                            {"stepfactor", required_argument, nullptr, 'f'},
                            {"iters", required_argument, nullptr, 'n'},
                            {"agg_iters", required_argument, nullptr, 'm'},
                            {"warmup_iters", required_argument, nullptr, 'w'},
                            {"parallel_init", required_argument, nullptr, 'p'},
                            {"check", required_argument, nullptr, 'c'},
                            {"op", required_argument, nullptr, 'o'},
                            {"datatype", required_argument, nullptr, 'd'},
                            {"root", required_argument, nullptr, 'r'},
                            {"blocking", required_argument, nullptr, 'z'},
                            {"stream_null", required_argument, nullptr, 'y'},
                            {"timeout", required_argument, nullptr, 'T'},
                            {"cudagraph", required_argument, nullptr, 'G'},
                            {"report_cputime", required_argument, nullptr, 'C'},
                            {"average", required_argument, nullptr, 'a'},
                            {"output_file", required_argument, nullptr, 'F'},
                            {"help", no_argument, nullptr, 'h'},
                            {nullptr, 0, nullptr, 0}};

// Parses a whole integer; false on trailing garbage or an empty string.
bool parseLong(const char* text, long* out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 0);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool parseIntOpt(char flag, const char* text, long minValue, int* out, std::string* error) {
  long v = 0;
  if (!parseLong(text, &v) || v < minValue || v > 1000000000L) {
    *error = std::string("invalid value '") + text + "' for -" + flag;
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

bool parseOps(const char* text, PerfArgs* args, std::string* error) {
  args->ops.clear();
  args->opAll = std::strcmp(text, "all") == 0;
  if (args->opAll) {
    for (int op = 0; op < groveNumOps; ++op) args->ops.push_back(static_cast<groveRedOp_t>(op));
    return true;
  }
  auto op = parseOp(text);
  if (!op) {
    *error = std::string("invalid op '") + text + "' (use sum, prod, min, max, avg or all)";
    return false;
  }
  args->ops.push_back(*op);
  return true;
}

bool parseTypes(const char* text, PerfArgs* args, std::string* error) {
  args->types.clear();
  args->typeAll = std::strcmp(text, "all") == 0;
  if (args->typeAll) {
    for (int t = 0; t < groveNumTypes; ++t) args->types.push_back(static_cast<groveDataType_t>(t));
    return true;
  }
  auto t = parseDtype(text);
  if (!t) {
    *error = std::string("invalid datatype '") + text +
             "' (use int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 "
             "or all)";
    return false;
  }
  args->types.push_back(*t);
  return true;
}

bool parseSizeOpt(const char* what, const char* text, size_t* out, std::string* error) {
  double v = parsePerfSize(text);
  if (v < 0) {
    *error = std::string("invalid size specified for '") + what + "'";
    return false;
  }
  *out = static_cast<size_t>(v);
  return true;
}

// Applies one option; false (with *error) when its value is bad.
bool applyOption(int c, const char* val, PerfArgs* a, std::string* error) {
  long v = 0;
  switch (c) {
    case 't': return parseIntOpt('t', val, 1, &a->nThreads, error);
    case 'g': return parseIntOpt('g', val, 1, &a->nGpus, error);
    case 'b': return parseSizeOpt("minbytes", val, &a->minBytes, error);
    case 'e': return parseSizeOpt("maxbytes", val, &a->maxBytes, error);
    case 'i': return parseSizeOpt("stepbytes", val, &a->stepBytes, error);
    case 'f':
      if (!parseLong(val, &v) || v < 1) {
        *error = std::string("invalid value '") + val + "' for -f";
        return false;
      }
      a->stepFactor = static_cast<size_t>(v);
      return true;
    case 'n': return parseIntOpt('n', val, 1, &a->iters, error);
    case 'm': return parseIntOpt('m', val, 1, &a->aggIters, error);
    case 'w': return parseIntOpt('w', val, 0, &a->warmupIters, error);
    case 'p': return parseIntOpt('p', val, 0, &a->parallelInit, error);
    case 'c': return parseIntOpt('c', val, 0, &a->check, error);
    case 'o': return parseOps(val, a, error);
    case 'd': return parseTypes(val, a, error);
    case 'r':
      if (std::strcmp(val, "all") == 0) {
        a->root = -1;
        return true;
      }
      return parseIntOpt('r', val, -1, &a->root, error);
    case 'z': return parseIntOpt('z', val, 0, &a->blocking, error);
    case 'y': return parseIntOpt('y', val, 0, &a->streamNull, error);
    case 'T': return parseIntOpt('T', val, 0, &a->timeoutSec, error);
    case 'G': return parseIntOpt('G', val, 0, &a->cudaGraph, error);
    case 'C': return parseIntOpt('C', val, 0, &a->reportCpuTime, error);
    case 'a': {
      int mode = 0;
      if (!parseIntOpt('a', val, 0, &mode, error)) return false;
      if (mode > 3) {
        *error = std::string("invalid value '") + val + "' for -a (use 0, 1, 2 or 3)";
        return false;
      }
      a->average = static_cast<AverageMode>(mode);
      return true;
    }
    case 'F': a->outputFile = val; return true;
    default: return false;
  }
}

}  // namespace

double parsePerfSize(const char* text) {
  double size = 0;
  char lit[2] = {0, 0};
  int n = std::sscanf(text, "%lf %1s", &size, lit);
  if (n < 1 || size < 0) return -1.0;
  if (n == 1) return size;
  switch (lit[0]) {
    case 'G':
    case 'g': return size * 1024.0 * 1024.0 * 1024.0;
    case 'M':
    case 'm': return size * 1024.0 * 1024.0;
    case 'K':
    case 'k': return size * 1024.0;
    default: return -1.0;
  }
}

ParseStatus parsePerfArgs(int argc, char* const* argv, PerfArgs* args, std::string* error) {
  *args = PerfArgs{};
  optind = 0;  // GNU: restart scanning (the parser may run more than once per process)
  opterr = 0;
  for (;;) {
    int longIndex = 0;
    int c = getopt_long(argc, argv, ":t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:hG:C:a:F:", kLongOpts,
                        &longIndex);
    if (c == -1) break;
    if (c == 'h') return ParseStatus::kHelp;
    if (c == '?' || c == ':') {
      std::string name =
          optopt ? std::string("-") + static_cast<char>(optopt) : std::string(argv[optind - 1]);
      *error = c == ':' ? "option " + name + " needs a value" : "invalid option " + name;
      return ParseStatus::kError;
    }
    if (!applyOption(c, optarg, args, error)) return ParseStatus::kError;
  }
  if (optind < argc) {
    *error = std::string("unexpected argument '") + argv[optind] + "'";
    return ParseStatus::kError;
  }
  if (args->minBytes > args->maxBytes) {
    *error = "invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(args->minBytes) +
             " > " + std::to_string(args->maxBytes);
    return ParseStatus::kError;
  }
  if (args->stepFactor <= 1 && args->stepBytes == 0) {
    *error = "stepbytes must be > 0 when stepfactor is 1";
    return ParseStatus::kError;
  }
  return ParseStatus::kRun;
}

std::vector<size_t> perfSizes(const PerfArgs& args) {
  std::vector<size_t> sizes;
  for (size_t size = args.minBytes; size <= args.maxBytes;) {
    sizes.push_back(size);
    size_t next = args.stepFactor > 1 ? size * args.stepFactor : size + args.stepBytes;
    if (next <= size) break;  // size 0 with a factor, or overflow
    size = next;
  }
  return sizes;
}

std::string perfUsage(const std::string& prog) {
  return "USAGE: " + prog +
         " \n\t"
         "[-t,--nthreads <num threads>] \n\t"
         "[-g,--ngpus <gpus per thread>] \n\t"
         "[-b,--minbytes <min size in bytes>] \n\t"
         "[-e,--maxbytes <max size in bytes>] \n\t"
         "[-i,--stepbytes <increment size>] \n\t"
         "[-f,--stepfactor <increment factor>] \n\t"
         "[-n,--iters <iteration count>] \n\t"
         "[-m,--agg_iters <aggregated iteration count>] \n\t"
         "[-w,--warmup_iters <warmup iteration count>] \n\t"
         "[-p,--parallel_init <0/1>] \n\t"
         "[-c,--check <check iteration count>] \n\t"
         "[-o,--op <sum/prod/min/max/avg/all>] \n\t"
         "[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/all>] "
         "\n\t"
         "[-r,--root <root/all>] \n\t"
         "[-z,--blocking <0/1> (1, the default: NULL stream; 0: a grove host stream)] \n\t"
         "[-y,--stream_null <0/1>] \n\t"
         "[-T,--timeout <time in seconds>] \n\t"
         "[-G,--cudagraph <num graph launches> (ignored for host memory)] \n\t"
         "[-C,--report_cputime <0/1>] \n\t"
         "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] "
         "\n\t"
         "[-h,--help]\n"
         "Ranks come from grove-launch, torchrun variables or mpirun; -t adds threads.\n";
}

}  // namespace grove::perf
