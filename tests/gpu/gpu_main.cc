// main() of the GPU test binaries: without a CUDA device they say so and exit
// 77, which ctest reports as Skipped.
#include <gtest/gtest.h>

#include <cstdio>

#include "kernels/cuda/cuda_kernels.h"

int main(int argc, char** argv) {
  if (grove::kernels::cuda::deviceCount() == 0) {
    std::printf("no CUDA device: GPU tests skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
