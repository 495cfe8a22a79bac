// GPU tier: the CUDA copy/reduce kernels against the CPU loops, bit for bit.
// Every dtype x op (avg with and without its final division) x sizes {0, 1,
// 7, 1021, 65536+3, 4Mi+5} x placements: all pointers at the same offset
// modulo 16 (each offset the dtype allows: the 16-byte body with heads and
// tails) and pointers at different offsets (the element-by-element path).
// Two-source reduce-copy (with and without dst2, and in place), multi-source
// folds of 2..8 sources, byte copies at every pair of offsets, and guard
// bytes around every destination. Without a device the binary prints "no
// CUDA device: GPU tests skipped" and exits 77 (ctest: Skipped).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "gpu/gpu_check.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/cuda_kernels.h"

namespace grove::gputest {
namespace {

namespace kc = grove::kernels::cuda;

constexpr size_t kBig = (size_t{4} << 20) + 5;
const size_t kSizes[] = {0, 1, 7, 1021, 65536 + 3, kBig};

/// One op as the executor uses it: avg with or without its final division.
struct OpCase {
  groveRedOp_t op;
  bool final;
  int nranks;
};
const OpCase kOps[] = {{groveSum, false, 1}, {groveProd, false, 1}, {groveMax, false, 1},
                       {groveMin, false, 1}, {groveAvg, false, 3},  {groveAvg, true, 3}};

/// Where the buffers of one launch sit: byte offsets from a 256-byte boundary.
struct Placement {
  size_t dst;
  long dst2;  ///< -1: no second destination
  size_t src[kc::kMaxReduceSources];
  int inPlace;  ///< -1, or the source the destination equals
};

/// Device buffers reused by every launch (inputs, destinations), allocated once.
class Pool {
 public:
  static Pool& get() {
    static Pool pool;
    return pool;
  }
  unsigned char* src(int i) { return bufs_[i]->get(); }
  unsigned char* dst() { return bufs_[kc::kMaxReduceSources]->get(); }
  unsigned char* dst2() { return bufs_[kc::kMaxReduceSources + 1]->get(); }
  static constexpr size_t kBytes = kBig * 8 + 256;

 private:
  Pool() {
    for (auto& b : bufs_) b = std::make_unique<DeviceBuffer>(kBytes);
  }
  std::unique_ptr<DeviceBuffer> bufs_[kc::kMaxReduceSources + 2];
};

std::string describe(groveDataType_t t, const OpCase& oc, size_t count, const Placement& pl,
                     int k) {
  std::string s = std::string(dtypeName(t)) + " " + opName(oc.op) + (oc.final ? "(final)" : "") +
                  " k=" + std::to_string(k) + " count=" + std::to_string(count) + " dst@" +
                  std::to_string(pl.dst) + " src@";
  for (int i = 0; i < k; ++i) s += std::to_string(pl.src[i]) + (i + 1 < k ? "," : "");
  if (pl.dst2 >= 0) s += " dst2@" + std::to_string(pl.dst2);
  if (pl.inPlace >= 0) s += " in-place(src" + std::to_string(pl.inPlace) + ")";
  return s;
}

/// Runs one multi-source reduce on the GPU and on the CPU; returns "" or what differs.
std::string checkReduce(groveDataType_t t, const OpCase& oc,
                        const std::vector<std::vector<unsigned char>>& in, size_t count,
                        const Placement& pl) {
  Pool& pool = Pool::get();
  const int k = static_cast<int>(in.size());
  const size_t bytes = count * dtypeSize(t);
  const size_t span = bytes + 64;
  const void* srcs[kc::kMaxReduceSources];
  for (int i = 0; i < k; ++i) {
    cudaOk(cudaMemset(pool.src(i), kGuard, span + pl.src[i]), "cudaMemset");
    cudaOk(cudaMemcpy(pool.src(i) + pl.src[i], in[i].data(), bytes, cudaMemcpyHostToDevice), "H2D");
    srcs[i] = pool.src(i) + pl.src[i];
  }
  unsigned char* dstBase = pl.inPlace >= 0 ? pool.src(pl.inPlace) : pool.dst();
  const size_t dstOff = pl.inPlace >= 0 ? pl.src[pl.inPlace] : pl.dst;
  if (pl.inPlace < 0) cudaOk(cudaMemset(pool.dst(), kGuard, span + dstOff), "cudaMemset");
  if (pl.dst2 >= 0) cudaOk(cudaMemset(pool.dst2(), kGuard, span + pl.dst2), "cudaMemset");
  void* dst2 = pl.dst2 >= 0 ? pool.dst2() + pl.dst2 : nullptr;
  if (k == 2 && pl.src[0] % 2 == 0) {  // exercise both entry points
    kc::reduceCopyAsync(t, oc.op, dstBase + dstOff, dst2, srcs[0], srcs[1], count, oc.final,
                        oc.nranks, nullptr);
  } else {
    kc::reduceMultiAsync(t, oc.op, dstBase + dstOff, dst2, srcs, k, count, oc.final, oc.nranks,
                         nullptr);
  }
  cudaOk(cudaDeviceSynchronize(), "kernel");

  // The CPU executor's left fold: acc = s0 op s1, acc = acc op s2, ...; final on the last step.
  std::vector<unsigned char> want(bytes + 1);
  kernels::reduce(t, oc.op, want.data(), nullptr, in[0].data(), in[1].data(), count,
                  oc.final && k == 2, oc.nranks);
  for (int i = 2; i < k; ++i) {
    kernels::reduce(t, oc.op, want.data(), nullptr, want.data(), in[i].data(), count,
                    oc.final && i + 1 == k, oc.nranks);
  }
  std::vector<unsigned char> got(span + dstOff);
  cudaOk(cudaMemcpy(got.data(), dstBase, got.size(), cudaMemcpyDeviceToHost), "D2H");
  std::string err = compareElements(t, oc.op, got.data() + dstOff, want.data(), count);
  if (err.empty()) err = checkGuards(got, dstOff, bytes);
  if (err.empty() && pl.dst2 >= 0) {
    std::vector<unsigned char> got2(span + pl.dst2);
    cudaOk(cudaMemcpy(got2.data(), pool.dst2(), got2.size(), cudaMemcpyDeviceToHost), "D2H");
    err = compareElements(t, oc.op, got2.data() + pl.dst2, want.data(), count);
    if (err.empty()) err = checkGuards(got2, pl.dst2, bytes);
    if (!err.empty()) err = "dst2: " + err;
  }
  return err.empty() ? err : describe(t, oc, count, pl, k) + ": " + err;
}

/// Placements for k sources of a dtype of esz bytes: every common offset the dtype
/// allows (a few for large counts), then one with the pointers at different offsets.
std::vector<Placement> placements(size_t esz, int k, size_t count) {
  std::vector<Placement> out;
  const size_t step = count >= kBig ? 16 - esz : esz;
  for (size_t off = 0; off < 16; off += step) {
    Placement pl{off, -1, {}, -1};
    for (int i = 0; i < k; ++i) pl.src[i] = off;
    if ((off / esz) % 2 == 1) pl.dst2 = static_cast<long>(off);
    out.push_back(pl);
    if (count >= kBig && off > 0) break;
  }
  Placement mixed{(16 - esz) % 16, static_cast<long>(esz), {}, -1};
  for (int i = 0; i < k; ++i) mixed.src[i] = (static_cast<size_t>(i + 1) * esz * 3) % 16;
  out.push_back(mixed);
  return out;
}

/// Checks every dtype x op x size x placement with k sources; stops after a few failures.
void sweep(int k, const std::vector<size_t>& sizes) {
  int failures = 0;
  for (int ti = 0; ti < groveNumTypes; ++ti) {
    const auto t = static_cast<groveDataType_t>(ti);
    for (size_t count : sizes) {
      std::vector<std::vector<unsigned char>> in;
      for (int i = 0; i < k; ++i) in.push_back(makeInput(t, count, 1000 * ti + 10 * i + count));
      for (const OpCase& oc : kOps) {
        for (const Placement& pl : placements(dtypeSize(t), k, count)) {
          std::string err = checkReduce(t, oc, in, count, pl);
          if (!err.empty()) {
            ADD_FAILURE() << err;
            if (++failures >= 10) return;
          }
        }
      }
    }
  }
}

TEST(GpuReduceCopy, EveryDtypeOpSizeAndAlignment) {
  sweep(2, std::vector<size_t>(std::begin(kSizes), std::end(kSizes)));
}

TEST(GpuReduceCopy, InPlaceOnEitherSource) {
  for (int ti = 0; ti < groveNumTypes; ++ti) {
    const auto t = static_cast<groveDataType_t>(ti);
    const size_t esz = dtypeSize(t);
    for (size_t count : {size_t{1021}, size_t{65536 + 3}}) {
      std::vector<std::vector<unsigned char>> in = {makeInput(t, count, 7 + ti),
                                                    makeInput(t, count, 8 + ti)};
      for (const OpCase& oc : kOps) {
        for (int which : {0, 1}) {
          Placement pl{0, which == 0 ? static_cast<long>(esz) : -1, {esz, esz}, which};
          EXPECT_EQ(checkReduce(t, oc, in, count, pl), "");
        }
      }
    }
  }
}

TEST(GpuMultiSource, FoldsTwoToEightSourcesLeftToRight) {
  for (int k : {3, 4, 5, 8}) sweep(k, {1, 7, 1021, 65536 + 3});
  sweep(kc::kMaxReduceSources, {kBig});
}

TEST(GpuCopy, EveryOffsetPairAndSize) {
  Pool& pool = Pool::get();
  int failures = 0;
  for (size_t bytes : kSizes) {
    std::vector<unsigned char> in = makeInput(groveUint8, bytes, bytes);
    for (size_t so = 0; so < 16; ++so) {
      for (size_t dof = 0; dof < 16; ++dof) {
        // Large copies: a pair per word size (16, 8, 4, 2, 1 bytes) is enough.
        if (bytes >= kBig && !((so == dof && so % 5 == 0) ||
                               (so == 0 && (dof == 8 || dof == 4 || dof == 2 || dof == 1))))
          continue;
        cudaOk(cudaMemcpy(pool.src(0) + so, in.data(), bytes, cudaMemcpyHostToDevice), "H2D");
        cudaOk(cudaMemset(pool.dst(), kGuard, bytes + 64), "cudaMemset");
        kc::copyAsync(pool.dst() + dof, pool.src(0) + so, bytes, nullptr);
        cudaOk(cudaDeviceSynchronize(), "copy kernel");
        std::vector<unsigned char> got(bytes + 64);
        cudaOk(cudaMemcpy(got.data(), pool.dst(), got.size(), cudaMemcpyDeviceToHost), "D2H");
        std::string err = checkGuards(got, dof, bytes);
        if (err.empty() && bytes > 0 && std::memcmp(got.data() + dof, in.data(), bytes) != 0)
          err = "bytes differ";
        if (!err.empty()) {
          ADD_FAILURE() << "copy of " << bytes << " bytes, src@" << so << " dst@" << dof << ": "
                        << err;
          if (++failures >= 10) return;
        }
      }
    }
  }
}

TEST(GpuKernels, BadArgumentsStillThrowOnADevice) {
  Pool& pool = Pool::get();
  EXPECT_THROW(kc::reduceCopyAsync(groveInt32, groveSum, pool.dst() + 2, nullptr, pool.src(0),
                                   pool.src(1), 4, false, 1, nullptr),
               grove::Error);
  EXPECT_THROW(kc::copyAsync(pool.dst(), nullptr, 4, nullptr), grove::Error);
}

}  // namespace
}  // namespace grove::gputest
