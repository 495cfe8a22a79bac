// A communicator made from another (split, shrink, grow) takes the parent's
// device unless its config names one: never the calling thread's current
// CUDA device, which may have changed since the parent was made.
#include <gtest/gtest.h>

#include "base/error.h"
#include "core/options.h"

namespace grove::core {
namespace {

CommOptions cudaParent() {
  CommOptions p;
  p.deviceKind = groveDeviceCuda;
  p.device = -1;  // made on "the current device", which resolved to 3
  p.nChannels = 4;
  return p;
}

TEST(ChildOptions, NoConfigTakesTheParentsOptionsAndTheDeviceItRunsOn) {
  const CommOptions o = childOptions(nullptr, cudaParent(), 3);
  EXPECT_EQ(o.deviceKind, groveDeviceCuda);
  EXPECT_EQ(o.device, 3);
  EXPECT_EQ(o.nChannels, 4);
}

TEST(ChildOptions, AConfigWithoutADeviceKeepsTheParentsDeviceAndKind) {
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.nChannels = 2;
  const CommOptions o = childOptions(&cfg, cudaParent(), 3);
  EXPECT_EQ(o.deviceKind, groveDeviceCuda);
  EXPECT_EQ(o.device, 3);
  EXPECT_EQ(o.nChannels, 2);  // what the config sets, it sets
}

TEST(ChildOptions, AConfigThatNamesADeviceOrKindWins) {
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.device = 5;
  EXPECT_EQ(childOptions(&cfg, cudaParent(), 3).device, 5);
  groveConfig_t host = GROVE_CONFIG_INITIALIZER;
  host.deviceKind = groveDeviceHost;
  const CommOptions o = childOptions(&host, cudaParent(), 3);
  EXPECT_EQ(o.deviceKind, groveDeviceHost);
  EXPECT_EQ(o.device, -1);  // a host child has no CUDA device to inherit
}

TEST(ChildOptions, AHostOrEmulatedParentHasNoDeviceToPass) {
  CommOptions parent;  // host
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  const CommOptions o = childOptions(&cfg, parent, -1);
  EXPECT_EQ(o.deviceKind, groveDeviceHost);
  EXPECT_EQ(o.device, -1);
}

TEST(ChildOptions, ABadConfigIsRefused) {
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.magic = 7;
  EXPECT_THROW(childOptions(&cfg, cudaParent(), 3), Error);
}

}  // namespace
}  // namespace grove::core
