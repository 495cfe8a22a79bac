// Command line of grove-launch:
//   grove-launch -n N [--port P] [--tag-output] [--timeout S] [--grace S] [--] CMD ARGS...
#pragma once

#include <string>
#include <vector>

namespace grove::tools {

/// Everything grove-launch was asked to do.
struct LaunchOptions {
  int nranks = 0;                    ///< -n: ranks to start (required)
  int port = 0;                      ///< --port: port of GROVE_COMM_ID (0 = pick a free one)
  bool tagOutput = false;            ///< --tag-output: prefix each line with "[rank] "
  double timeoutSec = 0;             ///< --timeout: kill the job after this long (0 = never)
  double graceSec = 15;              ///< --grace: how long the others may run after a failure
  std::vector<std::string> command;  ///< program and its arguments
};

/// Outcome of parsing.
enum class LaunchParse { kRun, kHelp, kError };

/// Parses argv; options stop at "--" or at the first word that is not an option.
LaunchParse parseLaunchOptions(int argc, char* const* argv, LaunchOptions* opts,
                               std::string* error);

/// Usage text.
std::string launchUsage();

}  // namespace grove::tools
