#include "tools/launch/launch_options.h"

#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace grove::tools {
namespace {

bool parseNumber(const char* text, double minValue, double maxValue, double* out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < minValue || v > maxValue) return false;
  *out = v;
  return true;
}

const option kLongOpts[] = {{"nranks", required_argument, nullptr, 'n'},
                            {"nproc_per_node", required_argument, nullptr, 'n'},
                            {"nproc-per-node", required_argument, nullptr, 'n'},
                            {"port", required_argument, nullptr, 'p'},
                            {"tag-output", no_argument, nullptr, 't'},
                            {"timeout", required_argument, nullptr, 'T'},
                            {"grace", required_argument, nullptr, 'g'},
                            {"help", no_argument, nullptr, 'h'},
                            {nullptr, 0, nullptr, 0}};

}  // namespace

std::string launchUsage() {
  return "usage: grove-launch -n N [--port P] [--tag-output] [--timeout S] [--grace S] [--] "
         "CMD [ARGS...]\n"
         "Starts N ranks of CMD on this machine (like torchrun --standalone) and waits.\n"
         "  -n, --nranks N     number of ranks to start (required, >= 1)\n"
         "  -p, --port P       port of the bootstrap root, GROVE_COMM_ID=127.0.0.1:P\n"
         "                     (default: a free port)\n"
         "  -t, --tag-output   prefix every output line with \"[rank] \"\n"
         "  -T, --timeout S    kill the whole job after S seconds (exit status 124)\n"
         "  -g, --grace S      after a rank fails, let the others run S more seconds\n"
         "                     before terminating them (default 15)\n"
         "  -h, --help         this text\n"
         "Each rank gets GROVE_COMM_ID, GROVE_RANK, GROVE_NRANKS, GROVE_LOCAL_RANK and the\n"
         "torchrun variables RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
         "MASTER_PORT. Exit status: 0 when every rank exits 0, else the first failing rank's\n"
         "status (128+signal for a signal).\n";
}

LaunchParse parseLaunchOptions(int argc, char* const* argv, LaunchOptions* opts,
                               std::string* error) {
  *opts = LaunchOptions{};
  optind = 0;
  opterr = 0;
  for (;;) {
    int c = getopt_long(argc, argv, "+:n:p:tT:g:h", kLongOpts, nullptr);
    if (c == -1) break;
    double v = 0;
    switch (c) {
      case 'h': return LaunchParse::kHelp;
      case 'n':
        if (!parseNumber(optarg, 1, 65536, &v) || v != std::floor(v)) {
          *error = std::string("bad rank count '") + optarg + "' (want an integer >= 1)";
          return LaunchParse::kError;
        }
        opts->nranks = static_cast<int>(v);
        break;
      case 'p':
        if (!parseNumber(optarg, 1, 65535, &v) || v != std::floor(v)) {
          *error = std::string("bad port '") + optarg + "' (want 1..65535)";
          return LaunchParse::kError;
        }
        opts->port = static_cast<int>(v);
        break;
      case 't': opts->tagOutput = true; break;
      case 'T':
        if (!parseNumber(optarg, 0, 1e9, &v)) {
          *error = std::string("bad timeout '") + optarg + "' (want seconds >= 0)";
          return LaunchParse::kError;
        }
        opts->timeoutSec = v;
        break;
      case 'g':
        if (!parseNumber(optarg, 0, 1e9, &v)) {
          *error = std::string("bad grace period '") + optarg + "' (want seconds >= 0)";
          return LaunchParse::kError;
        }
        opts->graceSec = v;
        break;
      case ':':
        *error = std::string("option ") + argv[optind - 1] + " needs a value";
        return LaunchParse::kError;
      default:
        *error = std::string("unknown option ") + argv[optind - 1];
        return LaunchParse::kError;
    }
  }
  for (int i = optind; i < argc; ++i) opts->command.emplace_back(argv[i]);
  if (opts->nranks < 1) {
    *error = "-n N (the number of ranks) is required";
    return LaunchParse::kError;
  }
  if (opts->command.empty()) {
    *error = "no command given (grove-launch -n N [options] [--] CMD ARGS...)";
    return LaunchParse::kError;
  }
  return LaunchParse::kRun;
}

}  // namespace grove::tools
