#include "perf/common/device_memory.h"

#include <strings.h>

#include <cstdio>
#include <stdexcept>
#include <utility>

#include "grove/grove.h"
#include "grove_build_info.h"
#include "tools/common/launch_env.h"

#if GROVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace grove::perf {
namespace {

#if GROVE_HAVE_CUDA
void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}
#define PERF_CUDA(call) check((call), #call)
cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }
#else
[[noreturn]] void noCuda(const char* what) {
  throw std::runtime_error(std::string(what) +
                           ": this build of the perf binaries has no CUDA support");
}
#endif

}  // namespace

std::optional<MemoryMode> resolveMemoryMode(const std::optional<std::string>& kind, bool emulation,
                                            bool cudaBuild, int deviceCount, std::string* error) {
  bool cuda = cudaBuild && deviceCount > 0;
  if (kind && !kind->empty()) {
    if (strcasecmp(kind->c_str(), "host") == 0) return MemoryMode::kHost;
    if (strcasecmp(kind->c_str(), "cuda") != 0) {
      *error = "GROVE_DEVICE_KIND '" + *kind + "' is not host or cuda";
      return std::nullopt;
    }
    if (emulation) return MemoryMode::kEmulated;
    if (!cudaBuild) {
      *error =
          "GROVE_DEVICE_KIND=cuda but this build has no CUDA support "
          "(GROVE_DEVICE_EMULATION=1 runs the device path on the host)";
      return std::nullopt;
    }
    if (deviceCount <= 0) {
      *error =
          "GROVE_DEVICE_KIND=cuda but no CUDA device is visible "
          "(GROVE_DEVICE_EMULATION=1 runs the device path on the host)";
      return std::nullopt;
    }
    cuda = true;
  }
  if (!cuda) return MemoryMode::kHost;
  return emulation ? MemoryMode::kEmulated : MemoryMode::kCuda;
}

std::optional<MemoryMode> chooseMemoryMode(std::string* error) {
  try {
    std::string refused;
    bool kindSet = false;
    std::optional<std::string> kind = tools::configValue("GROVE_DEVICE_KIND", &kindSet, &refused);
    const bool emulation =
        tools::configValue("GROVE_DEVICE_EMULATION", nullptr, &refused).value_or("0") == "1";
    if (!refused.empty()) throw std::runtime_error(refused);
    if (!kindSet) kind.reset();
    // An explicit choice of host or emulation needs no CUDA runtime call.
    const bool needCount =
        !(kind && strcasecmp(kind->c_str(), "host") == 0) && !(kind && emulation);
    return resolveMemoryMode(kind, emulation, perfHasCuda(), needCount ? cudaDeviceCount() : 0,
                             error);
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

const char* memoryModeText(MemoryMode mode) {
  switch (mode) {
    case MemoryMode::kHost: return "host memory, host communicators";
    case MemoryMode::kCuda:
      return "CUDA device memory, CUDA communicators, one non-blocking stream per rank "
             "(-z does not apply)";
    case MemoryMode::kEmulated:
      return "host memory, CUDA communicators on the host emulation (GROVE_DEVICE_EMULATION)";
  }
  return "?";
}

#if GROVE_HAVE_CUDA

bool perfHasCuda() { return true; }

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not sticky, clear it
    return 0;
  }
  return n;
}

void cudaUseDevice(int device) { PERF_CUDA(cudaSetDevice(device)); }

std::string cudaDeviceLabel(int device) {
  cudaDeviceProp prop{};
  PERF_CUDA(cudaGetDeviceProperties(&prop, device));
  char buf[300];
  std::snprintf(buf, sizeof(buf), "[0x%02x] %s", prop.pciBusID, prop.name);
  return buf;
}

void copyToDevice(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  PERF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, asStream(stream)));
  PERF_CUDA(cudaStreamSynchronize(asStream(stream)));
}

void copyToHost(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  PERF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, asStream(stream)));
  PERF_CUDA(cudaStreamSynchronize(asStream(stream)));
}

void cudaStreamWait(void* stream) { PERF_CUDA(cudaStreamSynchronize(asStream(stream))); }

DeviceBuffer::DeviceBuffer(size_t bytes) {
  const size_t size = bytes < 64 ? 64 : (bytes + 63) / 64 * 64;
  void* p = nullptr;
  PERF_CUDA(cudaMalloc(&p, size));
  ptr_ = static_cast<char*>(p);
  try {
    PERF_CUDA(cudaMemset(p, 0, size));
    PERF_CUDA(cudaDeviceSynchronize());
  } catch (...) {
    cudaFree(p);
    ptr_ = nullptr;
    throw;
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

void DeviceStream::create() {
  cudaStream_t s = nullptr;
  PERF_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

void DeviceStream::destroy() {
  if (stream_ != nullptr) cudaStreamDestroy(asStream(stream_));
  stream_ = nullptr;
}

#else  // no CUDA in this build

bool perfHasCuda() { return false; }
int cudaDeviceCount() { return 0; }
void cudaUseDevice(int) { noCuda("cudaSetDevice"); }
std::string cudaDeviceLabel(int) { noCuda("cudaGetDeviceProperties"); }
void copyToDevice(void*, const void*, size_t, void*) { noCuda("cudaMemcpyAsync"); }
void copyToHost(void*, const void*, size_t, void*) { noCuda("cudaMemcpyAsync"); }
void cudaStreamWait(void*) { noCuda("cudaStreamSynchronize"); }
DeviceBuffer::DeviceBuffer(size_t) { noCuda("cudaMalloc"); }
DeviceBuffer::~DeviceBuffer() = default;
void DeviceStream::create() { noCuda("cudaStreamCreateWithFlags"); }
void DeviceStream::destroy() { stream_ = nullptr; }

#endif

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));  // frees the current buffer
    ptr_ = std::exchange(other.ptr_, nullptr);
  }
  return *this;
}

DeviceStream::~DeviceStream() { destroy(); }

}  // namespace grove::perf
