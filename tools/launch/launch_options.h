// Command line of grove-launch:
//   grove-launch -n N [--port P] [--root-host ADDR] [--netns LIST] [--bind POLICY]
//                [--tag-output] [--timeout S] [--grace S] [--] CMD ARGS...
#pragma once

#include <string>
#include <vector>

namespace grove::tools {

/// --bind: which ranks are bound to one CPU each.
enum class BindPolicy {
  kAuto,  ///< only with more ranks than CPUs (the default)
  kNone,  ///< never: the scheduler places every rank
  kCore,  ///< always
};

/// Everything grove-launch was asked to do.
struct LaunchOptions {
  int nranks = 0;                      ///< -n: ranks to start (required)
  int port = 0;                        ///< --port: port of GROVE_COMM_ID (0 = pick a free one)
  std::string rootHost = "127.0.0.1";  ///< --root-host: host of GROVE_COMM_ID and MASTER_ADDR
  /// --netns: network namespaces, one per rank, or one name with "%d" (the rank);
  /// empty = every rank stays in the launcher's namespace.
  std::vector<std::string> netns;
  BindPolicy bind = BindPolicy::kAuto;  ///< --bind
  bool tagOutput = false;               ///< --tag-output: prefix each line with "[rank] "
  double timeoutSec = 0;                ///< --timeout: kill the job after this long (0 = never)
  double graceSec = 15;                 ///< --grace: how long the others may run after a failure
  std::vector<std::string> command;     ///< program and its arguments
};

/// Outcome of parsing.
enum class LaunchParse { kRun, kHelp, kError };

/// Parses argv; options stop at "--" or at the first word that is not an option.
LaunchParse parseLaunchOptions(int argc, char* const* argv, LaunchOptions* opts,
                               std::string* error);

/// Network namespace of `rank` from opts.netns: "" (none), the rank's entry,
/// or the single "%d" pattern with the rank filled in.
std::string netnsNameOf(const LaunchOptions& opts, int rank);

/// File to open for namespace `name`: /run/netns/NAME (as `ip netns add`
/// makes them), or `name` itself when it contains a '/' (e.g. /proc/PID/ns/net).
std::string netnsPathOf(const std::string& name);

/// The CPUs this process may run on (sched_getaffinity), ascending; empty
/// when unknown.
std::vector<int> allowedCpus();

/// The CPU `rank` is bound to under opts.bind, or -1 for none: rank r gets
/// cpus[r % cpus.size()] (cpus: the CPUs the launcher may use, ascending),
/// so consecutive ranks sit on different CPUs; kAuto binds only when there
/// are more ranks than CPUs.
int boundCpuOf(const LaunchOptions& opts, int rank, const std::vector<int>& cpus);

/// "host:port" for GROVE_COMM_ID ("[v6]:port" for an IPv6 literal).
std::string commIdOf(const std::string& host, int port);

/// Usage text.
std::string launchUsage();

}  // namespace grove::tools
