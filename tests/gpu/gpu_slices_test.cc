// GPU tier: the device-side slice functions (device_kernels.cuh) run the way
// a persistent kernel runs them -- one block per slice with its own thread
// count -- and give the CPU loops' results, bit for bit.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "gpu/gpu_check.h"
#include "gpu/slice_kernels.h"
#include "kernels/cpu/reduce.h"

namespace grove::gputest {
namespace {

constexpr size_t kCount = 1000003;  // odd: slices start at every offset modulo 16

TEST(GpuSlices, FloatSumOfThreeSourcesPerBlock) {
  const size_t bytes = kCount * 4;
  std::vector<std::vector<unsigned char>> in;
  DeviceBuffer d0(bytes), d1(bytes), d2(bytes), out(bytes);
  DeviceBuffer* dev[3] = {&d0, &d1, &d2};
  for (int i = 0; i < 3; ++i) {
    in.push_back(makeInput(groveFloat32, kCount, 40 + i));
    cudaOk(cudaMemcpy(dev[i]->get(), in[i].data(), bytes, cudaMemcpyHostToDevice), "H2D");
  }
  std::vector<unsigned char> want(bytes);
  kernels::reduce(groveFloat32, groveSum, want.data(), nullptr, in[0].data(), in[1].data(), kCount,
                  false, 1);
  kernels::reduce(groveFloat32, groveSum, want.data(), nullptr, want.data(), in[2].data(), kCount,
                  false, 1);
  for (int blocks : {1, 7, 64}) {
    const float* srcs[3] = {reinterpret_cast<const float*>(d0.get()),
                            reinterpret_cast<const float*>(d1.get()),
                            reinterpret_cast<const float*>(d2.get())};
    cudaOk(cudaMemset(out.get(), 0, bytes), "cudaMemset");
    sliceSumFloat(reinterpret_cast<float*>(out.get()), srcs, kCount, blocks);
    std::vector<unsigned char> got(bytes);
    cudaOk(cudaMemcpy(got.data(), out.get(), bytes, cudaMemcpyDeviceToHost), "D2H");
    EXPECT_EQ(compareElements(groveFloat32, groveSum, got.data(), want.data(), kCount), "")
        << blocks << " blocks";
  }
}

TEST(GpuSlices, HalfAverageOfFourSourcesPerBlock) {
  const size_t bytes = kCount * 2;
  std::vector<std::vector<unsigned char>> in;
  std::vector<std::unique_ptr<DeviceBuffer>> dev;
  const void* srcs[4];
  for (int i = 0; i < 4; ++i) {
    in.push_back(makeInput(groveFloat16, kCount, 50 + i));
    dev.push_back(std::make_unique<DeviceBuffer>(bytes));
    cudaOk(cudaMemcpy(dev[i]->get(), in[i].data(), bytes, cudaMemcpyHostToDevice), "H2D");
    srcs[i] = dev[i]->get();
  }
  std::vector<unsigned char> want(bytes);
  kernels::reduce(groveFloat16, groveAvg, want.data(), nullptr, in[0].data(), in[1].data(), kCount,
                  false, 4);
  kernels::reduce(groveFloat16, groveAvg, want.data(), nullptr, want.data(), in[2].data(), kCount,
                  false, 4);
  kernels::reduce(groveFloat16, groveAvg, want.data(), nullptr, want.data(), in[3].data(), kCount,
                  true, 4);
  DeviceBuffer out(bytes);
  sliceAvgHalf(out.get(), srcs, kCount, 13);
  std::vector<unsigned char> got(bytes);
  cudaOk(cudaMemcpy(got.data(), out.get(), bytes, cudaMemcpyDeviceToHost), "D2H");
  EXPECT_EQ(compareElements(groveFloat16, groveAvg, got.data(), want.data(), kCount), "");
}

TEST(GpuSlices, ByteCopyPerBlock) {
  const size_t bytes = 3 * kCount + 1;
  std::vector<unsigned char> in = makeInput(groveUint8, bytes, 60);
  DeviceBuffer src(bytes + 16), dst(bytes + 16);
  cudaOk(cudaMemcpy(src.get() + 3, in.data(), bytes, cudaMemcpyHostToDevice), "H2D");
  for (int blocks : {1, 5, 31}) {
    cudaOk(cudaMemset(dst.get(), 0, bytes + 16), "cudaMemset");
    sliceCopy(dst.get() + 11, src.get() + 3, bytes, blocks);
    std::vector<unsigned char> got(bytes);
    cudaOk(cudaMemcpy(got.data(), dst.get() + 11, bytes, cudaMemcpyDeviceToHost), "D2H");
    EXPECT_EQ(std::memcmp(got.data(), in.data(), bytes), 0) << blocks << " blocks";
  }
}

}  // namespace
}  // namespace grove::gputest
