#include "tools/launch/launch_options.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sched.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

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

// "%d" count of a namespace name; -1 when it holds another '%' sequence.
int rankPlaceholders(const std::string& name) {
  int n = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') continue;
    if (i + 1 >= name.size() || name[i + 1] != 'd') return -1;
    ++n;
    ++i;
  }
  return n;
}

// Splits --netns LIST and checks every name; false with *error set on bad text.
bool parseNetns(const std::string& list, std::vector<std::string>* out, std::string* error) {
  out->clear();
  size_t start = 0;
  for (;;) {
    size_t comma = list.find(',', start);
    out->push_back(
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const std::string& name : *out) {
    const bool isPath = name.find('/') != std::string::npos;
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of(" \t\n") != std::string::npos) {
      *error = "bad network namespace name '" + name + "' in --netns '" + list + "'";
      return false;
    }
    int holes = rankPlaceholders(name);
    if (holes < 0 || holes > 1 || (holes == 1 && out->size() > 1) || (isPath && name[0] != '/')) {
      *error = "bad network namespace name '" + name + "' in --netns '" + list +
               "' (want one name per rank, or a single name with one %d for the rank; "
               "a name with a '/' must be an absolute path)";
      return false;
    }
  }
  return true;
}

// Checks --root-host: an IPv4/IPv6 literal (brackets optional) or a host name.
bool parseRootHost(std::string text, std::string* out, std::string* error) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']')
    text = text.substr(1, text.size() - 2);
  unsigned char buf[sizeof(in6_addr)];
  bool ok = !text.empty();
  if (ok && text.find(':') != std::string::npos) {
    ok = inet_pton(AF_INET6, text.c_str(), buf) == 1;
  } else {
    for (char c : text)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_');
  }
  if (!ok) {
    *error = "bad --root-host '" + text + "' (want an IPv4 or IPv6 address or a host name)";
    return false;
  }
  *out = text;
  return true;
}

const option kLongOpts[] = {{"nranks", required_argument, nullptr, 'n'},
                            {"nproc_per_node", required_argument, nullptr, 'n'},
                            {"nproc-per-node", required_argument, nullptr, 'n'},
                            {"port", required_argument, nullptr, 'p'},
                            {"root-host", required_argument, nullptr, 'R'},
                            {"netns", required_argument, nullptr, 'N'},
                            {"bind", required_argument, nullptr, 'B'},
                            {"tag-output", no_argument, nullptr, 't'},
                            {"timeout", required_argument, nullptr, 'T'},
                            {"grace", required_argument, nullptr, 'g'},
                            {"help", no_argument, nullptr, 'h'},
                            {nullptr, 0, nullptr, 0}};

}  // namespace

std::string netnsNameOf(const LaunchOptions& opts, int rank) {
  if (opts.netns.empty()) return "";
  if (opts.netns.size() == 1 && rankPlaceholders(opts.netns[0]) == 1) {
    std::string name = opts.netns[0];
    return name.replace(name.find("%d"), 2, std::to_string(rank));
  }
  return opts.netns.at(static_cast<size_t>(rank));
}

std::string netnsPathOf(const std::string& name) {
  return name.find('/') != std::string::npos ? name : "/run/netns/" + name;
}

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

int boundCpuOf(const LaunchOptions& opts, int rank, const std::vector<int>& cpus) {
  if (cpus.empty() || opts.bind == BindPolicy::kNone) return -1;
  if (opts.bind == BindPolicy::kAuto && static_cast<size_t>(opts.nranks) <= cpus.size()) return -1;
  return cpus[static_cast<size_t>(rank) % cpus.size()];
}

std::string commIdOf(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string launchUsage() {
  return "usage: grove-launch -n N [--port P] [--root-host ADDR] [--netns LIST]\n"
         "                    [--bind auto|none|core] [--tag-output] [--timeout S]\n"
         "                    [--grace S] [--] CMD [ARGS...]\n"
         "Starts N ranks of CMD on this machine (like torchrun --standalone) and waits.\n"
         "  -n, --nranks N     number of ranks to start (required, >= 1)\n"
         "  -p, --port P       port of the bootstrap root, GROVE_COMM_ID=HOST:P\n"
         "                     (default: a free port of 127.0.0.1)\n"
         "  --root-host ADDR   host part of GROVE_COMM_ID and MASTER_ADDR (default\n"
         "                     127.0.0.1): an address of rank 0 every rank can reach\n"
         "  --netns LIST       run each rank in a network namespace: a comma-separated\n"
         "                     list of names, one per rank, or one name where %d stands\n"
         "                     for the rank (ns%d); a name is /run/netns/NAME (ip netns),\n"
         "                     a name with a '/' a path such as /proc/PID/ns/net. Needs\n"
         "                     CAP_SYS_ADMIN; a rank that cannot join fails (exit 126)\n"
         "  --bind POLICY      bind rank r to the (r mod C)-th of the C CPUs grove-launch\n"
         "                     may use, so consecutive ranks run on different CPUs:\n"
         "                     auto (default) only with more ranks than CPUs (left to\n"
         "                     the scheduler, two ranks that exchange data then often\n"
         "                     share a CPU, which slows loopback TCP), core always,\n"
         "                     none never\n"
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
    int c = getopt_long(argc, argv, "+:n:p:tT:g:hR:N:", kLongOpts, nullptr);
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
      case 'R':
        if (!parseRootHost(optarg, &opts->rootHost, error)) return LaunchParse::kError;
        break;
      case 'N':
        if (!parseNetns(optarg, &opts->netns, error)) return LaunchParse::kError;
        break;
      case 'B': {
        const std::string policy = optarg;
        if (policy == "auto")
          opts->bind = BindPolicy::kAuto;
        else if (policy == "none")
          opts->bind = BindPolicy::kNone;
        else if (policy == "core")
          opts->bind = BindPolicy::kCore;
        else {
          *error = "bad --bind '" + policy + "' (want auto, none or core)";
          return LaunchParse::kError;
        }
        break;
      }
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
  const bool pattern = opts->netns.size() == 1 && rankPlaceholders(opts->netns[0]) == 1;
  if (!opts->netns.empty() && !pattern && opts->netns.size() != static_cast<size_t>(opts->nranks)) {
    *error = "--netns names " + std::to_string(opts->netns.size()) + " namespace(s) for " +
             std::to_string(opts->nranks) + " rank(s) (want one per rank, or one name with %d)";
    return LaunchParse::kError;
  }
  if (opts->command.empty()) {
    *error = "no command given (grove-launch -n N [options] [--] CMD ARGS...)";
    return LaunchParse::kError;
  }
  return LaunchParse::kRun;
}

}  // namespace grove::tools
