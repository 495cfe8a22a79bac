#include "core/options.h"

#include <strings.h>

#include <cstddef>

#include "base/config.h"
#include "base/error.h"
#include "core/connections.h"

namespace grove::core {
namespace {

bool isSet(int v) { return v != GROVE_CONFIG_UNDEF_INT; }

}  // namespace

CommOptions resolveOptions(const groveConfig_t* cfg) {
  // Every GROVE_* value that is set must parse and be in range, whether this
  // function reads it or a layer reads it later: a typo never silently means
  // "the default" or "off".
  config::validateAll();
  CommOptions o;
  o.timeoutSec = config::getDouble("GROVE_TIMEOUT");
  o.nChannels = static_cast<int>(config::getInt("GROVE_NCHANNELS"));
  o.transport = parseTransportMode(config::getString("GROVE_TRANSPORT"), "GROVE_TRANSPORT");
  o.algo = config::getString("GROVE_ALGO");
  o.bufferBytes = config::getSize("GROVE_BUFFSIZE");
  o.chunkBytes = config::getSize("GROVE_CHUNKSIZE");
  o.treeJudgeBytes = config::getSize("GROVE_TREE_JUDGE_BYTES");
  o.planCacheDir = config::getString("GROVE_PLAN_CACHE_DIR");
  if (config::getChoice("GROVE_DEVICE_KIND") == "cuda") o.deviceKind = groveDeviceCuda;
  o.emulateDevice = config::getBool("GROVE_DEVICE_EMULATION");
  o.disableP2P = config::getBool("GROVE_P2P_DISABLE");
  o.deviceEngine = config::getChoice("GROVE_DEVICE_ENGINE");
  const std::string check = config::getChoice("GROVE_CHECK");
  o.checkCalls = check == "calls";
  o.tagCalls = check != "none";

  if (cfg != nullptr) {
    if (cfg->magic != GROVE_CONFIG_MAGIC)
      throwInvalidArgument("config was not initialised with GROVE_CONFIG_INITIALIZER (bad magic)");
    if (cfg->size < offsetof(groveConfig_t, commName) + sizeof(cfg->commName) ||
        cfg->size > sizeof(groveConfig_t))
      throwInvalidArgument("config has an unknown size " + std::to_string(cfg->size));
    if (cfg->version > GROVE_VERSION_CODE)
      throwInvalidArgument("config comes from a newer grove.h (version " +
                           std::to_string(cfg->version) + ")");
    if (isSet(cfg->deviceKind)) {
      if (cfg->deviceKind != groveDeviceHost && cfg->deviceKind != groveDeviceCuda)
        throwInvalidArgument("config.deviceKind " + std::to_string(cfg->deviceKind) +
                             " is not groveDeviceHost or groveDeviceCuda");
      o.deviceKind = static_cast<groveDeviceKind_t>(cfg->deviceKind);
    }
    if (isSet(cfg->device)) o.device = cfg->device;
    if (isSet(cfg->blocking)) {
      if (cfg->blocking != 0 && cfg->blocking != 1)
        throwInvalidArgument("config.blocking must be 0 or 1");
      o.blocking = cfg->blocking == 1;
    }
    if (isSet(cfg->timeoutMs)) {
      // As GROVE_TIMEOUT: positive, so hang detection cannot be switched off.
      if (cfg->timeoutMs <= 0) throwInvalidArgument("config.timeoutMs must be positive");
      o.timeoutSec = cfg->timeoutMs / 1000.0;
    }
    if (isSet(cfg->nChannels)) {
      if (cfg->nChannels < 0 || cfg->nChannels > 32)
        throwInvalidArgument("config.nChannels must be in [0, 32]");
      o.nChannels = cfg->nChannels;
    }
    if (cfg->transport != nullptr)
      o.transport = parseTransportMode(cfg->transport, "config.transport");
    if (cfg->algo != nullptr) o.algo = cfg->algo;
    if (cfg->commName != nullptr) o.name = cfg->commName;
  }
  o.bufferBytes = (o.bufferBytes + 63) / 64 * 64;
  if (o.chunkBytes == 0) o.chunkBytes = o.bufferBytes / 2;
  if (o.chunkBytes > o.bufferBytes / 2)
    throwInvalidArgument("GROVE_CHUNKSIZE must be at most half of GROVE_BUFFSIZE");
  o.chunkBytes = o.chunkBytes / 64 * 64;
  if (o.chunkBytes == 0) o.chunkBytes = 64;
  return o;
}

CommOptions childOptions(const groveConfig_t* config, const CommOptions& parent, int parentDevice) {
  CommOptions o = config != nullptr ? resolveOptions(config) : parent;
  if (config == nullptr || !isSet(config->deviceKind)) o.deviceKind = parent.deviceKind;
  const bool deviceSet = config != nullptr && isSet(config->device);
  if (!deviceSet && o.deviceKind == parent.deviceKind && parentDevice >= 0) o.device = parentDevice;
  return o;
}

}  // namespace grove::core
