// The host emulation of the device interpreter (see emulate.h).
#include "exec/device/emulate.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/config.h"
#include "base/dtype.h"
#include "base/error.h"
#include "exec/device/dev_lane.h"
#include "kernels/cpu/reduce.h"

namespace grove::exec::dev {

void HostCtx::copy(void* dst, const void* src, uint64_t bytes) {
  if (bytes != 0) kernels::copy(dst, src, static_cast<size_t>(bytes));
}

// The host executor's fold: acc = s0 op s1, acc = acc op s2, ...; `final`
// and the second destination on the last operation only.
void HostCtx::reduce(const DevReduce& r, void* dst, void* dst2, const void* const* srcs, int nsrc,
                     uint64_t count, bool final) {
  const auto dtype = static_cast<groveDataType_t>(r.dtype);
  const auto op = static_cast<groveRedOp_t>(r.op);
  for (int k = 1; k < nsrc; ++k) {
    const bool last = k + 1 == nsrc;
    kernels::reduce(dtype, op, dst, last ? dst2 : nullptr, k == 1 ? srcs[0] : dst, srcs[k],
                    static_cast<size_t>(count), final && last, r.nranks);
  }
}

namespace {

uint32_t loadStatus(DevControl& ctl) {
  return std::atomic_ref<uint32_t>(ctl.status).load(std::memory_order_acquire);
}

// Runs every lane of one phase: lanes 1.. on threads of their own, lane 0 here.
void runPhase(const DevCall& call, uint32_t callIndex, uint32_t phase, DevControl& ctl) {
  const DevPhase& ph = call.program.phases[phase];
  const uint32_t nLanes = ph.end - ph.begin;
  if (nLanes == 0) return;
  std::vector<std::thread> threads;
  threads.reserve(nLanes - 1);
  for (uint32_t l = 1; l < nLanes; ++l) {
    threads.emplace_back([&call, callIndex, phase, l, &ctl] {
      HostCtx ctx;
      runLane(call, callIndex, phase, l, ctx, &ctl);
    });
  }
  HostCtx ctx;
  runLane(call, callIndex, phase, 0, ctx, &ctl);
  for (std::thread& t : threads) t.join();
}

}  // namespace

void runEmulated(const DevCall* calls, size_t n, DevControl& ctl) {
  for (size_t c = 0; c < n; ++c) {
    if (!dtypeValid(calls[c].reduce.dtype))
      throwInvalidArgument("device emulation: call " + std::to_string(c) +
                           " has an invalid data type");
    if (!opValid(calls[c].reduce.op))
      throwInvalidArgument("device emulation: call " + std::to_string(c) +
                           " has an invalid reduction op");
  }
  if (ctl.timeoutNs == 0) {
    ctl.timeoutNs = static_cast<uint64_t>(config::getDouble("GROVE_TIMEOUT") * 1e9);
  }
  for (size_t c = 0; c < n; ++c) {
    for (uint32_t p = 0; p < calls[c].program.nPhases; ++p) {
      if (loadStatus(ctl) != kDevOk) return;
      runPhase(calls[c], static_cast<uint32_t>(c), p, ctl);
    }
  }
}

HostRingArena::~HostRingArena() {
  for (void* b : blocks_) std::free(b);
}

DevRing HostRingArena::add(uint64_t capacity) {
  if (capacity == 0 || capacity % transport::kRingCapacityAlign != 0) {
    throwInvalidArgument("device ring capacity " + std::to_string(capacity) +
                         " is not a positive multiple of " +
                         std::to_string(transport::kRingCapacityAlign));
  }
  const size_t bytes = transport::ringBytes(capacity);
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* block = std::aligned_alloc(64, rounded);
  if (block == nullptr)
    throwSystemError("allocating a device ring of " + std::to_string(bytes) + " bytes", ENOMEM);
  std::memset(block, 0, rounded);
  blocks_.push_back(block);
  return transport::ringAt(block, capacity);
}

}  // namespace grove::exec::dev
