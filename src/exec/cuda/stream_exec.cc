// The CUDA runner of stream tapes (see stream_exec.h).
#include "exec/cuda/stream_exec.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "exec/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace grove::exec::cuda {
namespace {

using WaitWriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using AttributeFn = CUresult (*)(int*, CUdevice_attribute, CUdevice);

// The driver functions the runner needs, looked up once.
struct DriverOps {
  WaitWriteFn waitValue64 = nullptr;
  WaitWriteFn writeValue64 = nullptr;
  AttributeFn getAttribute = nullptr;
  std::string error;  // empty when all were found
};

template <class Fn>
void lookUp(const char* symbol, Fn* fn, std::string& error) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &q);
  if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
    (void)cudaGetLastError();
    if (error.empty()) error = std::string("the driver has no ") + symbol;
    return;
  }
  *fn = reinterpret_cast<Fn>(p);
}

const DriverOps& driverOps() {
  static const DriverOps ops = [] {
    DriverOps o;
    lookUp("cuStreamWaitValue64", &o.waitValue64, o.error);
    lookUp("cuStreamWriteValue64", &o.writeValue64, o.error);
    lookUp("cuDeviceGetAttribute", &o.getAttribute, o.error);
    return o;
  }();
  return ops;
}

void checkDriver(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  throw Error(groveUnhandledCudaError,
              std::string("exec::cuda: ") + what + " failed (CUresult " + std::to_string(r) + ")");
}

cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t asEvent(void* e) { return static_cast<cudaEvent_t>(e); }

void* newEvent() {
  cudaEvent_t e = nullptr;
  detail::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return e;
}

void* newStream() {
  cudaStream_t s = nullptr;
  detail::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void enqueueOp(const dev::TapeOp& op, cudaStream_t s, unsigned waitFlags) {
  const DriverOps& d = driverOps();
  switch (op.kind) {
    case dev::TapeOpKind::kWait:
      checkDriver(d.waitValue64(s, reinterpret_cast<CUdeviceptr>(op.word), op.value,
                                CU_STREAM_WAIT_VALUE_GEQ | waitFlags),
                  "cuStreamWaitValue64");
      break;
    case dev::TapeOpKind::kPost:
      checkDriver(d.writeValue64(s, reinterpret_cast<CUdeviceptr>(op.word), op.value,
                                 CU_STREAM_WRITE_VALUE_DEFAULT),
                  "cuStreamWriteValue64");
      break;
    case dev::TapeOpKind::kCopy:
      detail::check(cudaMemcpyAsync(op.dst, op.src[0], op.bytes, cudaMemcpyDefault, s),
                    "cudaMemcpyAsync");
      break;
    case dev::TapeOpKind::kZero:
      detail::check(cudaMemsetAsync(op.dst, 0, op.bytes, s), "cudaMemsetAsync");
      break;
    case dev::TapeOpKind::kReduce:
      kernels::cuda::reduceMultiAsync(
          static_cast<groveDataType_t>(op.reduce.dtype), static_cast<groveRedOp_t>(op.reduce.op),
          op.dst, op.dst2, op.src, op.nsrc, op.bytes, op.final != 0, op.reduce.nranks, s);
      break;
  }
}

}  // namespace

bool streamTapesSupported(int device, std::string* why) {
  const DriverOps& d = driverOps();
  if (!d.error.empty()) {
    if (why != nullptr) *why = d.error;
    return false;
  }
  int ok = 0;
  if (d.getAttribute(&ok, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device) !=
          CUDA_SUCCESS ||
      ok == 0) {
    if (why != nullptr) *why = "the device has no 64-bit stream memory operations";
    return false;
  }
  return true;
}

TapeStreams::TapeStreams(int device) : device_(device) {
  detail::check(cudaSetDevice(device_), "cudaSetDevice");
  std::string why;
  if (!streamTapesSupported(device_, &why))
    throw Error(groveInvalidUsage, "exec::cuda: stream tapes cannot run on device " +
                                       std::to_string(device_) + ": " + why);
  // Where the platform can, a passed wait also makes the writes that came
  // before the counter (from another GPU, the host proxy, a NIC) visible
  // to the operations after it.
  int flush = 0;
  if (driverOps().getAttribute(&flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, device_) ==
          CUDA_SUCCESS &&
      flush != 0)
    waitFlags_ = CU_STREAM_WAIT_VALUE_FLUSH;
  // The release stream first, so it is least likely to share a hardware
  // queue with a lane stream blocked on a wait.
  int lo = 0, hi = 0;
  cudaStream_t s = nullptr;
  detail::check(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange");
  detail::check(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi),
                "cudaStreamCreateWithPriority");
  private_ = s;
  hub_ = newEvent();
}

int hardwareQueues() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int n = v != nullptr ? std::atoi(v) : 0;
  return n > 0 ? n : 8;  // CUDA's default
}

TapeStreams::~TapeStreams() {
  for (void* e : laneDone_) cudaEventDestroy(asEvent(e));
  for (void* s : lanes_) cudaStreamDestroy(asStream(s));
  if (hub_ != nullptr) cudaEventDestroy(asEvent(hub_));
  if (private_ != nullptr) cudaStreamDestroy(asStream(private_));
}

void TapeStreams::ensureLanes(size_t n) {
  if (n > lanes_.size() && n + 1 > static_cast<size_t>(hardwareQueues()) && !warned_) {
    warned_ = true;
    GROVE_WARN(log::kColl,
               "stream tapes: %zu lane streams and a release stream, but CUDA multiplexes "
               "streams onto %d hardware queues (CUDA_DEVICE_MAX_CONNECTIONS): a stream waiting "
               "for a peer may hold up another's work; export CUDA_DEVICE_MAX_CONNECTIONS=32 "
               "before the process starts",
               n, hardwareQueues());
  }
  while (lanes_.size() < n) {
    void* s = newStream();
    void* e = nullptr;
    try {
      e = newEvent();
    } catch (...) {
      cudaStreamDestroy(asStream(s));
      throw;
    }
    lanes_.push_back(s);
    laneDone_.push_back(e);
  }
}

void TapeStreams::joinLanes(void* stream) {
  for (size_t l = 0; l < lanes_.size(); ++l)
    if (cudaEventRecord(asEvent(laneDone_[l]), asStream(lanes_[l])) == cudaSuccess)
      (void)cudaStreamWaitEvent(asStream(stream), asEvent(laneDone_[l]), 0);
  (void)cudaGetLastError();
}

bool TapeStreams::releasesDone() {
  const cudaError_t err = cudaStreamQuery(asStream(private_));
  (void)cudaGetLastError();
  return err != cudaErrorNotReady;
}

void TapeStreams::enqueue(const dev::LaunchTape& tape, void* stream) {
  detail::check(cudaSetDevice(device_), "cudaSetDevice");
  ensureLanes(tape.maxLanes());
  const cudaStream_t user = asStream(stream);
  detail::check(cudaEventRecord(asEvent(hub_), user), "cudaEventRecord");
  std::vector<size_t> next;
  for (const std::vector<dev::TapeLane>& phase : tape.phases) {
    for (size_t l = 0; l < phase.size(); ++l)
      detail::check(cudaStreamWaitEvent(asStream(lanes_[l]), asEvent(hub_), 0),
                    "cudaStreamWaitEvent");
    // Lanes go out interleaved, a piece (up to a post) of each in turn: an
    // enqueue blocks once a stream's queue is full, and a lane enqueued
    // whole first could block before a lane its peers need went out at all.
    next.assign(phase.size(), 0);
    for (bool more = true; more;) {
      more = false;
      for (size_t l = 0; l < phase.size(); ++l) {
        const std::vector<dev::TapeOp>& ops = phase[l].ops;
        const cudaStream_t s = asStream(lanes_[l]);
        while (next[l] < ops.size()) {
          const dev::TapeOp& op = ops[next[l]++];
          enqueueOp(op, s, waitFlags_);
          if (op.kind == dev::TapeOpKind::kPost) break;
        }
        more = more || next[l] < ops.size();
      }
    }
    for (size_t l = 0; l < phase.size(); ++l) {
      detail::check(cudaEventRecord(asEvent(laneDone_[l]), asStream(lanes_[l])), "cudaEventRecord");
      detail::check(cudaStreamWaitEvent(user, asEvent(laneDone_[l]), 0), "cudaStreamWaitEvent");
    }
    detail::check(cudaEventRecord(asEvent(hub_), user), "cudaEventRecord");
  }
}

bool TapeStreams::release(const std::vector<std::pair<uint64_t*, uint64_t>>& words) {
  (void)cudaSetDevice(device_);
  // One batch at a time: the release stream may share a hardware queue
  // with a waiting lane, and a queue that fills would block this call.
  if (!releasesDone()) return false;
  const DriverOps& d = driverOps();
  for (const auto& [word, value] : words)
    (void)d.writeValue64(asStream(private_), reinterpret_cast<CUdeviceptr>(word), value,
                         CU_STREAM_WRITE_VALUE_DEFAULT);
  return true;
}

}  // namespace grove::exec::cuda
