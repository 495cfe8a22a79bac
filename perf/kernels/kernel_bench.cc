// Kernel benchmark: grove's CUDA copy, reduce-copy (fp32/fp16/bf16 sum) and
// 4-source reduce against cudaMemcpyAsync device-to-device, 1 MiB .. 1 GiB.
//
// How it works: each benchmark allocates its buffers once per size, then
// every iteration records a CUDA event, enqueues a batch of launches (enough
// for ~256 MiB of traffic, so launch gaps do not dominate small sizes),
// records a second event and waits; the iteration's manual time is the
// event time divided by the batch. GB/s counts bytes read plus bytes
// written: 2 x size for copies, 3 x size for a two-source reduce, 5 x size
// for four sources. At the end a table gives each kernel's bandwidth as a
// share of cudaMemcpyAsync's at the same size.
//
// The "_cold" cases rotate over enough sets of buffers that together they
// hold twice the GPU's L2, so every launch starts with none of its bytes in
// L2; the plain cases reuse one set, which stays in L2 while it fits (a
// 16 MiB copy touches 32 MiB, a two-source reduce 48 MiB: an H100's L2 is
// 50 MB). Comparing the two at 8-32 MiB tells a cache effect from a kernel's
// own cost; each cold case is compared with the cold memcpy.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"

namespace {

namespace kc = grove::kernels::cuda;

void ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

/// Measured GB/s by (kernel name, bytes per buffer).
std::map<std::pair<std::string, int64_t>, double> gResults;

/// One benchmarked operation: `buffers` device buffers of `size` bytes (the last
/// one the destination), `traffic` bytes read + written per launch.
struct Case {
  const char* name;
  int sources;
  groveDataType_t dtype;  // for reduces
  bool memcpyApi;         // cudaMemcpyAsync instead of a grove kernel
  bool cold = false;      // rotate over buffer sets twice the L2's size
};

/// Bytes of the current device's L2 cache (0 if unknown).
size_t l2Bytes() {
  int dev = 0, bytes = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, dev) != cudaSuccess)
    return 0;
  return static_cast<size_t>(bytes);
}

void runCase(benchmark::State& state, const Case& c) {
  const size_t size = static_cast<size_t>(state.range(0));
  const int buffers = c.sources + 1;
  const size_t traffic = size * static_cast<size_t>(buffers);
  const size_t sets = c.cold ? std::max<size_t>(1, (2 * l2Bytes() + traffic - 1) / traffic) : 1;
  std::vector<std::vector<void*>> all(sets, std::vector<void*>(buffers, nullptr));
  for (auto& set : all)
    for (void*& b : set) {
      ok(cudaMalloc(&b, size), "cudaMalloc");
      ok(cudaMemset(b, 0x11, size), "cudaMemset");  // small finite values for every dtype
    }
  size_t next = 0;
  cudaStream_t stream;
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t start, stop;
  ok(cudaEventCreate(&start), "cudaEventCreate");
  ok(cudaEventCreate(&stop), "cudaEventCreate");
  const int batch = static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / traffic));
  const size_t esz = c.dtype == groveFloat32 ? 4 : 2;
  auto launch = [&] {
    const std::vector<void*>& bufs = all[next];
    next = (next + 1) % sets;
    if (c.memcpyApi) {
      ok(cudaMemcpyAsync(bufs[1], bufs[0], size, cudaMemcpyDeviceToDevice, stream),
         "cudaMemcpyAsync");
    } else if (c.sources == 1) {
      kc::copyAsync(bufs[1], bufs[0], size, stream);
    } else {
      kc::reduceMultiAsync(c.dtype, groveSum, bufs[c.sources], nullptr,
                           const_cast<const void* const*>(bufs.data()), c.sources, size / esz,
                           false, 1, stream);
    }
  };
  launch();  // warm-up
  ok(cudaStreamSynchronize(stream), "warm-up");
  double seconds = 0;
  int64_t launches = 0;
  for (auto _ : state) {
    ok(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < batch; ++i) launch();
    ok(cudaEventRecord(stop, stream), "cudaEventRecord");
    ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(ms / 1e3 / batch);
    seconds += ms / 1e3;
    launches += batch;
  }
  const double gbs = seconds > 0 ? static_cast<double>(traffic) * launches / seconds / 1e9 : 0;
  state.counters["GB/s"] = gbs;
  state.counters["MiB"] = static_cast<double>(size) / (1 << 20);
  gResults[{c.name, state.range(0)}] = gbs;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  for (auto& set : all)
    for (void* b : set) cudaFree(b);
}

const Case kCases[] = {
    {"memcpy_d2d", 1, groveUint8, true},
    {"grove_copy", 1, groveUint8, false},
    {"reduce_copy_f32_sum", 2, groveFloat32, false},
    {"reduce_copy_f16_sum", 2, groveFloat16, false},
    {"reduce_copy_bf16_sum", 2, groveBfloat16, false},
    {"reduce4_f32_sum", 4, groveFloat32, false},
    {"reduce4_bf16_sum", 4, groveBfloat16, false},
    {"memcpy_d2d_cold", 1, groveUint8, true, true},
    {"grove_copy_cold", 1, groveUint8, false, true},
    {"reduce_copy_f32_sum_cold", 2, groveFloat32, false, true},
    {"reduce4_f32_sum_cold", 4, groveFloat32, false, true},
};

void printShares() {
  std::printf("\n%-22s %10s %10s %8s\n", "kernel", "MiB", "GB/s", "memcpy%");
  for (const auto& [key, gbs] : gResults) {
    if (key.first.rfind("memcpy_d2d", 0) == 0) continue;
    const bool cold =
        key.first.size() > 5 && key.first.compare(key.first.size() - 5, 5, "_cold") == 0;
    auto ref = gResults.find({cold ? "memcpy_d2d_cold" : "memcpy_d2d", key.second});
    double share = ref != gResults.end() && ref->second > 0 ? 100.0 * gbs / ref->second : 0;
    std::printf("%-22s %10lld %10.1f %7.1f%%\n", key.first.c_str(),
                static_cast<long long>(key.second >> 20), gbs, share);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (kc::deviceCount() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 0;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) std::printf("device: %s\n", prop.name);
  for (const Case& c : kCases) {
    benchmark::RegisterBenchmark(c.name, [&c](benchmark::State& s) { runCase(s, c); })
        ->ArgsProduct({{1 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20, 256 << 20,
                        int64_t{1} << 30}})
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  printShares();
  return 0;
}
