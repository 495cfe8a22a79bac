// Host side of the CUDA kernels' API: argument checks and the dtype
// dispatch table, in plain C++ (no CUDA header), so both are unit-tested on
// machines without a GPU. The launchers themselves live in the .cu files.
#include "kernels/cuda/launch.h"

#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "base/error.h"

namespace grove::kernels::cuda {
namespace detail {
namespace {

constexpr ReduceLauncher kLaunchers[groveNumTypes] = {
    launchReduceInt8,    launchReduceUint8,   launchReduceInt32,   launchReduceUint32,
    launchReduceInt64,   launchReduceUint64,  launchReduceFloat16, launchReduceFloat32,
    launchReduceFloat64, launchReduceBfloat16};

/// True when [p, p+bytes) and [q, q+bytes) share a byte but p != q.
bool overlapsPartly(const void* p, const void* q, size_t bytes) {
  auto a = reinterpret_cast<uintptr_t>(p);
  auto b = reinterpret_cast<uintptr_t>(q);
  if (a == b) return false;
  return a < b ? b - a < bytes : a - b < bytes;
}

std::string ptrName(int i) { return "source " + std::to_string(i); }

}  // namespace

ReduceKind reduceKindFor(groveRedOp_t op, bool final) {
  switch (op) {
    case groveSum: return ReduceKind::kSum;
    case groveProd: return ReduceKind::kProd;
    case groveMax: return ReduceKind::kMax;
    case groveMin: return ReduceKind::kMin;
    case groveAvg: return final ? ReduceKind::kAvgFinal : ReduceKind::kSum;
    default: break;
  }
  throwInvalidArgument("kernels::cuda: invalid op " + std::to_string(static_cast<int>(op)));
}

ReduceLauncher reduceLauncher(groveDataType_t dtype) {
  return dtypeValid(dtype) ? kLaunchers[dtype] : nullptr;
}

void checkReduceArgs(groveDataType_t dtype, groveRedOp_t op, const void* dst, const void* dst2,
                     const void* const* srcs, int nsrcs, size_t count, bool final, int nranks) {
  const std::string where = "kernels::cuda::reduce: ";
  if (!dtypeValid(dtype)) {
    throwInvalidArgument(where + "invalid data type " + std::to_string(static_cast<int>(dtype)));
  }
  if (!opValid(op))
    throwInvalidArgument(where + "invalid op " + std::to_string(static_cast<int>(op)));
  if (nsrcs < 2 || nsrcs > kMaxReduceSources) {
    throwInvalidArgument(where + "needs 2 to " + std::to_string(kMaxReduceSources) +
                         " sources, got " + std::to_string(nsrcs));
  }
  if (op == groveAvg && final && nranks < 1) {
    throwInvalidArgument(where + "avg needs nranks >= 1, got " + std::to_string(nranks));
  }
  if (count == 0) return;
  const size_t esz = dtypeSize(dtype);
  if (count > SIZE_MAX / esz)
    throwInvalidArgument(where + "count " + std::to_string(count) + " overflows");
  if (srcs == nullptr) throwInvalidArgument(where + "null source array with count > 0");
  const size_t bytes = count * esz;
  auto checkPtr = [&](const void* p, const std::string& name) {
    if (p == nullptr) throwInvalidArgument(where + "null " + name + " with count > 0");
    if (reinterpret_cast<uintptr_t>(p) % esz != 0) {
      throwInvalidArgument(where + name + " is not aligned to the " + std::to_string(esz) +
                           "-byte " + dtypeName(dtype) + " element");
    }
  };
  checkPtr(dst, "destination");
  if (dst2 != nullptr) checkPtr(dst2, "second destination");
  for (int i = 0; i < nsrcs; ++i) {
    checkPtr(srcs[i], ptrName(i));
    if (overlapsPartly(dst, srcs[i], bytes) ||
        (dst2 != nullptr && overlapsPartly(dst2, srcs[i], bytes))) {
      throwInvalidArgument(where + "a destination overlaps " + ptrName(i) +
                           " without being equal to it");
    }
  }
  if (dst2 != nullptr && overlapsPartly(dst, dst2, bytes)) {
    throwInvalidArgument(where + "the two destinations overlap without being equal");
  }
}

void checkCopyArgs(const void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr) {
    throwInvalidArgument(std::string("kernels::cuda::copy: null ") +
                         (dst == nullptr ? "destination" : "source") + " with bytes > 0");
  }
  if (overlapsPartly(dst, src, bytes)) {
    throwInvalidArgument("kernels::cuda::copy: source and destination overlap");
  }
}

}  // namespace detail

void copyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  detail::checkCopyArgs(dst, src, bytes);
  if (bytes == 0 || dst == src) return;
  detail::launchCopy(dst, src, bytes, stream);
}

void reduceMultiAsync(groveDataType_t dtype, groveRedOp_t op, void* dst, void* dst2,
                      const void* const* srcs, int nsrcs, size_t count, bool final, int nranks,
                      void* stream) {
  detail::checkReduceArgs(dtype, op, dst, dst2, srcs, nsrcs, count, final, nranks);
  if (count == 0) return;
  detail::ReduceLaunch l{};
  l.dst = dst;
  l.dst2 = dst2;
  for (int i = 0; i < nsrcs; ++i) l.src[i] = srcs[i];
  l.nsrc = nsrcs;
  l.count = count;
  l.kind = detail::reduceKindFor(op, final);
  l.nranks = nranks;
  l.stream = stream;
  detail::reduceLauncher(dtype)(l);
}

void reduceCopyAsync(groveDataType_t dtype, groveRedOp_t op, void* dst, void* dst2, const void* a,
                     const void* b, size_t count, bool final, int nranks, void* stream) {
  const void* srcs[2] = {a, b};
  reduceMultiAsync(dtype, op, dst, dst2, srcs, 2, count, final, nranks, stream);
}

}  // namespace grove::kernels::cuda
