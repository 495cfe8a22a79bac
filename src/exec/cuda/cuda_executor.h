// Host API of the CUDA executor: launching lowered device programs
// (exec/device/dev_program.h) on a stream, and the RAII pieces a
// communicator needs around a launch. Plain C++: it includes no CUDA
// header, so code built without nvcc can call it; streams and events are
// passed as `void*` (cudaStream_t; nullptr is the legacy default stream).
//
// How a launch runs: launchCalls enqueues the calls (a group) on the stream
// and returns at once, as NCCL does. By default one persistent kernel runs
// them all: block b runs lane b of each phase (executor_kernel.cu), and a
// grid-wide barrier separates the phases and the calls. The barrier is a
// counter in device memory (LaunchOptions::barrier, zeroed on the stream
// before each launch), not a cooperative launch: the ranks sharing a GPU
// each launch their own kernel, and those kernels must overlap. When no
// barrier word is given, or the grid is too large to be co-resident, the
// calls run as one launch per (call, phase) on the same stream instead.
//
// Every CUDA failure throws grove::Error(groveUnhandledCudaError, "<what>:
// <CUDA error text>"); bad arguments throw groveInvalidArgument before
// anything is enqueued.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "exec/device/dev_program.h"

namespace grove::exec::cuda {

using dev::DevCall;
using dev::DevControl;
using dev::DevProgram;
using dev::DevProgramView;
using transport::DevRing;

/// Threads of each block of the executor kernels (one block runs one lane).
inline constexpr uint32_t kExecThreads = 512;
/// Most calls one kernel launch carries in its parameters (more are split).
inline constexpr uint32_t kMaxCallsPerLaunch = 12;
/// Device ordinals below this get the executor's per-device state (kernels
/// loaded, resident blocks, the housekeeping stream and memory pool).
inline constexpr int kMaxDevices = 64;

/// The persistent kernel's parameters, passed by value (kernel parameter
/// space, at most 4 KiB).
struct DevLaunch {
  uint32_t nCalls = 0;          ///< calls[0..nCalls) run, in order
  uint32_t firstCall = 0;       ///< index of calls[0] in the whole group (for failure reports)
  DevControl* ctl = nullptr;    ///< device address of the launch's control block
  uint64_t* barrier = nullptr;  ///< device word of the grid barrier, zero at launch
  DevCall calls[kMaxCallsPerLaunch];
};
static_assert(sizeof(DevLaunch) <= 4096, "DevLaunch exceeds the 4 KiB kernel parameter limit");

/// How launchCalls runs the calls.
enum class LaunchMode : uint8_t {
  kAuto,        ///< persistent when a barrier is given and the grid fits, else phased
  kPersistent,  ///< one kernel per kMaxCallsPerLaunch calls (needs a barrier; throws if the grid cannot be co-resident)
  kPhased,      ///< one kernel per (call, phase)
};

/// Options of launchCalls.
struct LaunchOptions {
  uint64_t* barrier = nullptr;  ///< device word for the grid barrier (MappedControl::barrier())
  LaunchMode mode = LaunchMode::kAuto;
};

/// Blocks a launch of `calls` needs: the most lanes of any phase (at least 1).
uint32_t gridFor(const DevCall* calls, size_t n);

/// Enqueues calls[0..n) on `stream` and returns. `ctl` is the device address
/// of a DevControl the host can read (MappedControl); its status must be 0
/// (kDevOk) and stays 0 unless a call fails. The programs' device memory, the
/// rings and the buffers must stay valid until the stream has run the launch.
/// n == 0 enqueues nothing.
void launchCalls(const DevCall* calls, size_t n, DevControl* ctl, void* stream,
                 const LaunchOptions& options = {});

/// Blocks of kExecThreads the current device keeps resident at once for the
/// persistent kernel (SMs x blocks per SM).
uint32_t residentBlocks();

/// Loads the executor's kernels on the current device now. With CUDA's lazy
/// module loading (the default), the first launch of a kernel loads it, and
/// a load may wait for every kernel running on the device: when a kernel of
/// this process is waiting for a rank whose launch is still to come from
/// this process (ranks sharing a GPU as threads), that wait never ends.
/// launchCalls calls this once per device before its first launch.
void preloadKernels();

/// A lowered program uploaded to device memory: its phases, lanes and steps
/// and its send and receive ring tables, in one allocation.
class ProgramUpload {
 public:
  /// Uploads `program` with the ring handles of its links: sends[i] is the
  /// ring of program.sendKeys[i], recvs[i] that of program.recvKeys[i] (as
  /// this rank's address space sees them). Throws groveInvalidArgument when
  /// the tables do not match the keys.
  ProgramUpload(const DevProgram& program, const std::vector<DevRing>& sends,
                const std::vector<DevRing>& recvs);
  ~ProgramUpload();
  ProgramUpload(const ProgramUpload&) = delete;
  ProgramUpload& operator=(const ProgramUpload&) = delete;
  /// The program as the kernel sees it (device pointers).
  const DevProgramView& view() const { return view_; }
  /// Bytes of the device allocation.
  size_t bytes() const { return bytes_; }

 private:
  void* mem_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
  DevProgramView view_;
};

/// A DevControl in mapped pinned host memory (the host reads the status and
/// raises the abort flag while the kernel runs), plus the device word of the
/// persistent kernel's grid barrier. One per stream of launches in flight.
class MappedControl {
 public:
  /// Allocates and zeroes both.
  MappedControl();
  ~MappedControl();
  MappedControl(const MappedControl&) = delete;
  MappedControl& operator=(const MappedControl&) = delete;
  /// Host address of the control block.
  DevControl* host() const { return host_; }
  /// Device address of the same block (for launchCalls).
  DevControl* device() const { return device_; }
  /// Device address of the grid-barrier word (LaunchOptions::barrier).
  uint64_t* barrier() const { return barrier_; }
  /// Zeroes the status and failure fields and the abort flag and sets the
  /// wait timeout (ns, 0 = none). Only while no launch using it is in flight.
  void reset(uint64_t timeoutNs);
  /// Raises the abort flag (any thread, any time).
  void abort();
  /// The status the device wrote (DevStatus; 0 while running or after success).
  uint32_t status() const;

 private:
  DevControl* host_ = nullptr;
  DevControl* device_ = nullptr;
  uint64_t* barrier_ = nullptr;
};

/// A zeroed device allocation for the executor's own use (scratch, test
/// buffers), freed on destruction. Movable.
/// ProgramUpload and DeviceBuffer allocate, fill and free stream-ordered
/// (cudaMallocAsync/cudaFreeAsync) on a private non-blocking stream per
/// device, never with cudaMalloc/cudaFree or on the legacy stream: those may
/// wait for every kernel on the device, and when ranks share a GPU as
/// threads of one process, a peer's kernel may be waiting for this very
/// thread's next launch. The owner frees only memory no launch still uses.
class DeviceBuffer {
 public:
  /// An empty buffer (no allocation).
  DeviceBuffer() = default;
  /// Allocates `bytes` of device memory on the current device and zeroes it
  /// (0 bytes: no allocation, get() is null).
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  /// The device address (null when empty).
  uint8_t* get() const { return ptr_; }
  /// The allocation size.
  size_t size() const { return bytes_; }

 private:
  uint8_t* ptr_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

/// A non-blocking CUDA stream (cudaStreamNonBlocking), destroyed with it.
class Stream {
 public:
  /// Creates the stream on the current device.
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  /// The cudaStream_t.
  void* get() const { return stream_; }

 private:
  void* stream_ = nullptr;
};

/// A CUDA event without timing, to order work across streams: record it on
/// one stream, make another wait for it.
class Event {
 public:
  /// Creates the event on the current device.
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  /// Records the event on `stream` (captures the work enqueued so far).
  void record(void* stream);
  /// Makes `stream` wait, on the device, for the last record().
  void waitOn(void* stream);
  /// True once the recorded work has completed (never throws for "not ready").
  bool done();

 private:
  void* event_ = nullptr;
};

/// Events kept for reuse. Creating or destroying an event takes a driver
/// lock that another rank thread of this process may hold while it waits for
/// this rank's next launch, so an engine never destroys one while it runs.
class EventPool {
 public:
  /// A spare event, or a new one (on the current device).
  std::unique_ptr<Event> take();
  /// Keeps `e` for a later take().
  void give(std::unique_ptr<Event> e) { spare_.push_back(std::move(e)); }

 private:
  std::vector<std::unique_ptr<Event>> spare_;
};

/// `buf`, grown to at least `bytes` once `drained()` says no launch uses it
/// any more; throws grove::Error(groveRemoteError) if it does not.
uint8_t* growScratch(DeviceBuffer& buf, size_t bytes, const std::function<bool()>& drained);

/// True when `p` is device or managed memory (cudaPointerGetAttributes);
/// false for host memory (pinned or not) and when no CUDA device exists.
bool isDevicePointer(const void* p);

/// The current device of the calling thread.
int currentDevice();

/// Makes `device` the calling thread's current device.
void setDevice(int device);

/// Waits until every operation enqueued on `stream` has completed.
void synchronizeStream(void* stream);

/// Enqueues dst[0:bytes) = src[0:bytes) on `stream` with cudaMemcpyAsync
/// (cudaMemcpyDefault: any memory the device reaches; between device
/// buffers the driver's copy, at the copy limit).
void memcpyAsync(void* dst, const void* src, size_t bytes, void* stream);

/// True once every operation enqueued on `stream` has completed (non-blocking).
bool streamDone(void* stream);

}  // namespace grove::exec::cuda
