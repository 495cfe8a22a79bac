// Where the perf binaries' buffers live, and the few CUDA runtime calls the
// driver needs for device memory (nccl-tests' cudaMalloc/cudaMemcpy/stream use).
//
// How it works: the memory mode is chosen once per process from
// GROVE_DEVICE_KIND (read through groveGetConfig, as the library reads it) and
// GROVE_DEVICE_EMULATION:
//   unset  device memory when this build has CUDA and a CUDA device is
//          visible, host memory otherwise;
//   host   host memory (the host executor, as without CUDA);
//   cuda   device memory; an error when the build has no CUDA or no device
//          is visible.
// A CUDA choice with GROVE_DEVICE_EMULATION=1 becomes the emulated mode: the
// communicators are CUDA communicators running on the host emulation, whose
// buffers are host memory and whose calls complete before they return.
// The CUDA calls live in device_memory.cc behind GROVE_HAVE_CUDA; in a
// build without CUDA they throw (the mode choice never selects them there).
// Every CUDA failure throws std::runtime_error naming the call and the CUDA error.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace grove::perf {

/// Where a run's buffers live and which communicators it makes.
enum class MemoryMode {
  kHost,      ///< host buffers, host communicators (the default without a GPU)
  kCuda,      ///< cudaMalloc'd buffers, CUDA communicators, one cudaStream_t per rank
  kEmulated,  ///< host buffers, CUDA communicators on the host emulation
};

/// The mode for a GROVE_DEVICE_KIND value (nullopt = unset), the emulation
/// flag, whether the build has CUDA and how many devices are visible. Pure;
/// on a bad combination returns nullopt with the reason in *error.
std::optional<MemoryMode> resolveMemoryMode(const std::optional<std::string>& kind, bool emulation,
                                            bool cudaBuild, int deviceCount, std::string* error);

/// resolveMemoryMode over this process's configuration and devices.
std::optional<MemoryMode> chooseMemoryMode(std::string* error);

/// A short description of mode for the parameter header.
const char* memoryModeText(MemoryMode mode);

/// True when this build of the perf binaries can use CUDA.
bool perfHasCuda();

/// Number of visible CUDA devices (0 without CUDA support or without a device).
int cudaDeviceCount();

/// Makes CUDA device `device` current on the calling thread.
void cudaUseDevice(int device);

/// nccl-tests' device label: "[0x<pci bus id>] <device name>".
std::string cudaDeviceLabel(int device);

/// Copies bytes host -> device on stream and waits for the copy.
void copyToDevice(void* dst, const void* src, size_t bytes, void* stream);

/// Copies bytes device -> host on stream (after the work queued there) and waits.
void copyToHost(void* dst, const void* src, size_t bytes, void* stream);

/// Waits for everything queued on stream (a cudaStream_t).
void cudaStreamWait(void* stream);

/// A zeroed cudaMalloc'd buffer on the current device, freed on destruction.
class DeviceBuffer {
 public:
  /// An empty buffer.
  DeviceBuffer() = default;
  /// Allocates max(bytes, 64) bytes (rounded up to 64) and zeroes them.
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// The device pointer (nullptr when empty).
  char* get() const { return ptr_; }

 private:
  char* ptr_ = nullptr;
};

/// A non-blocking cudaStream_t on the current device, destroyed with this object.
class DeviceStream {
 public:
  /// No stream yet.
  DeviceStream() = default;
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  /// Creates the stream (cudaStreamNonBlocking).
  void create();
  /// Destroys the stream now (no-op without one).
  void destroy();
  /// The cudaStream_t as the collectives' stream argument (nullptr before create).
  void* handle() const { return stream_; }

 private:
  void* stream_ = nullptr;
};

}  // namespace grove::perf
