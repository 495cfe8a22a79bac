// Enqueues stream tapes (exec/device/stream_tape.h) on a GPU: the CUDA
// runner of the tape path that ranks of several processes sharing one GPU
// without MPS use, where no kernel may wait for another rank.
//
// How it works: each lane of a phase gets a CUDA stream of its own
// (non-blocking, made once and kept). A launch records an event on the
// caller's stream that every lane stream of the first phase waits for; a
// lane's operations go on its stream in order (the lanes interleaved, a
// piece of each in turn, so no lane's enqueue runs far ahead) -- a wait is
// cuStreamWaitValue64 (GEQ, the GPU's front end holds the stream; other
// contexts run meanwhile), a post cuStreamWriteValue64 (with its default
// memory barrier: the earlier copies and kernels of the stream are visible
// first), a copy cudaMemcpyAsync, a zero cudaMemsetAsync, a reduce the
// kernels layer's multi-source reduce (a short kernel that never waits);
// at the end of a phase the caller's stream waits for every lane's event
// and records the event the next phase's lanes wait for. So the caller's
// stream is ordered before and after the launch, as with the persistent
// kernel, and the call returns once everything is enqueued.
//
// The stream memory operations come from the driver through
// cudaGetDriverEntryPointByVersion (no link against libcuda); 64-bit waits
// need CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS.
//
// Streams share CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 unless set
// before the process starts): a wait blocks its queue, so a stream that
// shares the queue of a waiting one may wait with it. Tape phases have few
// lanes (host-style channel counts); with more streams than queues the
// runner warns once and asks for CUDA_DEVICE_MAX_CONNECTIONS=32. The release
// stream is made first, at the highest priority.
//
// A stream wait cannot look at an abort flag or a deadline. release()
// writes, on a private stream, a value past every awaited one into each
// awaited counter, so waiting streams drain (moving garbage: the
// communicator is failed by then) instead of hanging.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exec/device/stream_tape.h"

namespace grove::exec::cuda {

/// True when `device` can run stream tapes; otherwise false and `why` says
/// what is missing (driver entry points, 64-bit stream memory operations).
bool streamTapesSupported(int device, std::string* why);

/// CUDA's hardware queues per context: CUDA_DEVICE_MAX_CONNECTIONS, else 8.
int hardwareQueues();

/// The lane streams and events of one communicator's tape launches on `device`.
class TapeStreams {
 public:
  explicit TapeStreams(int device);
  ~TapeStreams();
  TapeStreams(const TapeStreams&) = delete;
  TapeStreams& operator=(const TapeStreams&) = delete;

  /// Enqueues `tape` after the work enqueued on `stream` so far and makes
  /// `stream` wait for it. Throws grove::Error(groveUnhandledCudaError).
  void enqueue(const dev::LaunchTape& tape, void* stream);
  /// Writes each (word, value) on a private stream and returns at once;
  /// false (nothing written) while an earlier batch is still queued.
  bool release(const std::vector<std::pair<uint64_t*, uint64_t>>& words);
  /// True when every release batch has landed.
  bool releasesDone();
  /// Best effort after a failed enqueue: makes `stream` wait for whatever
  /// every lane stream holds (errors ignored).
  void joinLanes(void* stream);

 private:
  void ensureLanes(size_t n);

  int device_;
  unsigned waitFlags_ = 0;       // CU_STREAM_WAIT_VALUE_FLUSH where the platform has it
  bool warned_ = false;          // said once that lanes outnumber the hardware queues
  std::vector<void*> lanes_;     // cudaStream_t, one per lane
  std::vector<void*> laneDone_;  // cudaEvent_t, one per lane stream
  void* hub_ = nullptr;          // cudaEvent_t: where the next phase starts
  void* private_ = nullptr;      // cudaStream_t for release()
};

}  // namespace grove::exec::cuda
