// The perf binaries' memory-mode choice (perf/common/device_memory.h).
#include <gtest/gtest.h>

#include "perf/common/device_memory.h"

namespace grove::perf {
namespace {

std::optional<MemoryMode> resolve(const char* kind, bool emulation, bool cudaBuild, int devices,
                                  std::string* error) {
  std::optional<std::string> k;
  if (kind != nullptr) k = kind;
  return resolveMemoryMode(k, emulation, cudaBuild, devices, error);
}

TEST(PerfMemoryMode, UnsetFollowsTheBuildAndTheDevices) {
  std::string error;
  EXPECT_EQ(resolve(nullptr, false, false, 0, &error), MemoryMode::kHost);
  EXPECT_EQ(resolve(nullptr, false, true, 0, &error), MemoryMode::kHost);
  EXPECT_EQ(resolve(nullptr, false, false, 2, &error), MemoryMode::kHost);
  EXPECT_EQ(resolve(nullptr, false, true, 2, &error), MemoryMode::kCuda);
  EXPECT_EQ(resolve("", false, true, 1, &error), MemoryMode::kCuda);
  EXPECT_EQ(resolve(nullptr, true, true, 1, &error), MemoryMode::kEmulated);
  EXPECT_EQ(resolve(nullptr, true, false, 0, &error), MemoryMode::kHost);
}

TEST(PerfMemoryMode, HostAlwaysWins) {
  std::string error;
  EXPECT_EQ(resolve("host", false, true, 4, &error), MemoryMode::kHost);
  EXPECT_EQ(resolve("HOST", true, true, 4, &error), MemoryMode::kHost);
}

TEST(PerfMemoryMode, CudaNeedsADeviceOrTheEmulation) {
  std::string error;
  EXPECT_EQ(resolve("cuda", false, true, 1, &error), MemoryMode::kCuda);
  EXPECT_EQ(resolve("cuda", true, false, 0, &error), MemoryMode::kEmulated);
  EXPECT_EQ(resolve("Cuda", true, true, 3, &error), MemoryMode::kEmulated);
  EXPECT_FALSE(resolve("cuda", false, false, 0, &error));
  EXPECT_NE(error.find("no CUDA support"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(resolve("cuda", false, true, 0, &error));
  EXPECT_NE(error.find("no CUDA device"), std::string::npos) << error;
}

TEST(PerfMemoryMode, BadKindIsAnError) {
  std::string error;
  EXPECT_FALSE(resolve("gpu", false, true, 1, &error));
  EXPECT_NE(error.find("'gpu' is not host or cuda"), std::string::npos) << error;
}

TEST(PerfMemoryMode, NoCudaBuildSeesNoDevice) {
  if (perfHasCuda()) GTEST_SKIP() << "CUDA build: the device count depends on the machine";
  EXPECT_EQ(cudaDeviceCount(), 0);
  EXPECT_THROW(DeviceBuffer(16), std::exception);
}

}  // namespace
}  // namespace grove::perf
