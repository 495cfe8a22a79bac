// The CUDA executor's host API without a GPU (exec/cuda/cuda_executor.h):
// the launch parameters' size and packing, grid sizing, argument checks
// that fire before anything is enqueued, and, where no device exists, a
// clean grove::Error(groveUnhandledCudaError) from every call that needs one.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "base/error.h"
#include "exec/cuda/cuda_executor.h"
#include "kernels/cuda/cuda_kernels.h"

namespace grove::exec::cuda {
namespace {

template <class F>
groveResult_t codeOf(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (what != nullptr) *what = e.what();
    return e.code();
  }
  return groveSuccess;
}

TEST(CudaExecApi, LaunchParametersFitTheKernelParameterSpace) {
  EXPECT_LE(sizeof(DevLaunch), 4096u);
  EXPECT_EQ(offsetof(DevLaunch, calls) % alignof(DevCall), 0u);
  EXPECT_EQ(sizeof(DevLaunch), offsetof(DevLaunch, calls) + kMaxCallsPerLaunch * sizeof(DevCall));
  // One more call would not fit: the constant is as large as the limit allows.
  EXPECT_GT(offsetof(DevLaunch, calls) + (kMaxCallsPerLaunch + 1) * sizeof(DevCall), 4096u);
  EXPECT_EQ(sizeof(dev::DevCall) % 8, 0u);
}

TEST(CudaExecApi, GridIsTheWidestPhase) {
  std::vector<DevCall> calls(3);
  calls[0].program.maxLanes = 0;
  calls[1].program.maxLanes = 5;
  calls[2].program.maxLanes = 2;
  EXPECT_EQ(gridFor(calls.data(), calls.size()), 5u);
  EXPECT_EQ(gridFor(calls.data(), 1), 1u);
  EXPECT_EQ(gridFor(nullptr, 0), 1u);
}

TEST(CudaExecApi, BadLaunchArgumentsThrowBeforeAnyCudaCall) {
  DevCall call;
  DevControl fake;  // never dereferenced: the checks fire first
  EXPECT_EQ(codeOf([&] { launchCalls(nullptr, 1, &fake, nullptr); }), groveInvalidArgument);
  EXPECT_EQ(codeOf([&] { launchCalls(&call, 1, nullptr, nullptr); }), groveInvalidArgument);
  EXPECT_EQ(
      codeOf([&] {
        launchCalls(&call, 1, &fake, nullptr, LaunchOptions{nullptr, LaunchMode::kPersistent});
      }),
      groveInvalidArgument);
  call.program.nPhases = 2;  // phases but no upload
  EXPECT_EQ(codeOf([&] { launchCalls(&call, 1, &fake, nullptr); }), groveInvalidArgument);
  // Nothing to launch: no CUDA call at all.
  EXPECT_EQ(codeOf([&] { launchCalls(nullptr, 0, &fake, nullptr); }), groveSuccess);
}

TEST(CudaExecApi, UploadRefusesRingTablesThatDoNotMatchTheProgram) {
  DevProgram program;
  program.sendKeys.push_back(transport::LinkKey{1, 0, 0});
  std::string what;
  EXPECT_EQ(codeOf([&] { ProgramUpload up(program, {}, {}); }, &what), groveInvalidArgument);
  EXPECT_NE(what.find("ring tables"), std::string::npos) << what;
}

TEST(CudaExecApi, EmptyDeviceBufferNeedsNoDevice) {
  DeviceBuffer empty(0);
  EXPECT_EQ(empty.get(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  DeviceBuffer moved = std::move(empty);
  EXPECT_EQ(moved.get(), nullptr);
}

TEST(CudaExecApi, WithoutADeviceEveryCallGivesACleanCudaError) {
  if (kernels::cuda::deviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  int hostWord = 0;
  EXPECT_FALSE(isDevicePointer(&hostWord));
  EXPECT_FALSE(isDevicePointer(nullptr));
  std::string what;
  EXPECT_EQ(codeOf([] { MappedControl ctl; }, &what), groveUnhandledCudaError);
  EXPECT_NE(what.find("exec::cuda: "), std::string::npos) << what;
  EXPECT_EQ(codeOf([] { DeviceBuffer b(64); }), groveUnhandledCudaError);
  EXPECT_EQ(codeOf([] { Stream s; }), groveUnhandledCudaError);
  EXPECT_EQ(codeOf([] { currentDevice(); }), groveUnhandledCudaError);
  // One phase (its arrays are never read: the launch itself fails).
  const dev::DevPhase phase{0, 1};
  const dev::DevLane lane{0, 0};
  DevCall call;
  call.program.phases = &phase;
  call.program.lanes = &lane;
  call.program.nPhases = 1;
  call.program.maxLanes = 1;
  DevControl fake;
  // The first launch loads the kernels first (lazy loading), and fails there.
  EXPECT_EQ(codeOf([&] { launchCalls(&call, 1, &fake, nullptr); }, &what), groveUnhandledCudaError);
  EXPECT_NE(what.find("loading the executor kernels"), std::string::npos) << what;
  uint64_t word = 0;
  EXPECT_EQ(codeOf([&] {
              launchCalls(&call, 1, &fake, nullptr, LaunchOptions{&word, LaunchMode::kPersistent});
            }),
            groveUnhandledCudaError);
  DevProgram program;
  EXPECT_EQ(codeOf([&] { ProgramUpload up(program, {}, {}); }), groveUnhandledCudaError);
}

}  // namespace
}  // namespace grove::exec::cuda
