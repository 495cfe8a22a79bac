// CommOptions: a communicator's settings, resolved once at init from the
// caller's groveConfig_t (fields it set) and the GROVE_* registry (the rest).
#pragma once

#include <string>

#include "grove/grove.h"

namespace grove::core {

/// Resolved settings of one communicator.
struct CommOptions {
  groveDeviceKind_t deviceKind = groveDeviceHost;
  int device = -1;             ///< CUDA device; -1 = the calling thread's current device
  bool emulateDevice = false;  ///< CUDA comms run on the host emulation (GROVE_DEVICE_EMULATION)
  std::string deviceEngine = "auto";  ///< GROVE_DEVICE_ENGINE: auto, kernel or stream
  bool disableP2P = false;  ///< CUDA comms link GPUs over host_staged only (GROVE_P2P_DISABLE)
  bool blocking = true;
  double timeoutSec = 30.0;
  int nChannels = 0;  ///< 0 = automatic per transport
  /// GROVE_TRANSPORT: "auto" or registered transport names, comma-separated.
  std::string transport = "auto";
  std::string algo;              ///< override text in GROVE_ALGO syntax
  std::string name;              ///< for logs
  size_t bufferBytes = 1 << 20;  ///< per link half
  size_t chunkBytes = 0;         ///< 0 = bufferBytes / 2
  uint64_t treeJudgeBytes =
      0;  ///< message size the cost model picks tree counts at; 0 = the packer's rule
  std::string planCacheDir;  ///< GROVE_PLAN_CACHE_DIR: plans kept on disk ("" = memory only)
  bool tagCalls = true;      ///< GROVE_CHECK=tags or calls (exec/call_tag.h)
  bool checkCalls = false;   ///< GROVE_CHECK=calls (core/call_check.h)
};

/// Resolves options; `config` may be null. Throws grove::Error
/// (groveInvalidArgument) for a config with a bad size/magic/version or a
/// field out of range, naming the field.
CommOptions resolveOptions(const groveConfig_t* config);

/// The options of a communicator made from another (split, shrink, grow):
/// the config's (NULL: the parent's), and where the config leaves them
/// unset, the parent's device kind and the CUDA device the parent runs on
/// (`parentDevice`; -1: none), never the calling thread's current device.
CommOptions childOptions(const groveConfig_t* config, const CommOptions& parent, int parentDevice);

}  // namespace grove::core
