// N ranks of the CUDA executor in one process on the one GPU, for the GPU
// tests: each rank's program is built by the planners, lowered
// (exec/device/dev_program.h), uploaded, bound to rings in device memory
// (one zeroed allocation per directed link, both ends using the same
// DevRing) and launched on the rank's own stream; all ranks are launched
// before any is waited for, so their kernels run side by side. The same
// programs, on the same initial bytes, also run on CPU thread ranks with the
// host executor over the loopback transport: the reference every device
// buffer is compared with, bit for bit (NaN payloads of arithmetic results
// excepted), whole allocations included (nothing outside the outputs may change).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/select/selector.h"
#include "exec/cuda/cuda_executor.h"
#include "ir/schedule.h"

namespace grove::gputest {

/// One collective call as every rank makes it.
struct ExecCase {
  plan::Coll coll = plan::Coll::kAllReduce;
  plan::Algo algo = plan::Algo::kRing;
  int nranks = 2;
  uint64_t count = 0;
  groveDataType_t dtype = groveFloat32;
  groveRedOp_t op = groveSum;
  bool inPlace = false;
  int root = 0;
  plan::PlanParams params{2, 2048};  ///< channels, chunk bytes
  uint64_t ringBytes = 4096;         ///< capacity of every ring (host links too)
  exec::cuda::LaunchMode mode = exec::cuda::LaunchMode::kAuto;
};

/// "allreduce/ring n=3 count=7 float32 sum inplace root=1 persistent".
std::string caseText(const ExecCase& c);

/// Rings in device memory, one per directed link (from, to, channel, route),
/// made on first use and zeroed; shared by every call of a test.
class DeviceRings {
 public:
  /// Rings of `capacity` bytes (a multiple of transport::kRingCapacityAlign).
  explicit DeviceRings(uint64_t capacity) : capacity_(capacity) {}
  /// The ring from -> to on the link key's channel and route.
  transport::DevRing get(int from, int to, const transport::LinkKey& key);
  /// Sets the `closed` word of the ring from -> to (channel 0, route 0) on the device.
  void close(int from, int to);

 private:
  uint64_t capacity_;
  std::map<std::tuple<int, int, int, uint32_t>,
           std::pair<exec::cuda::DeviceBuffer, transport::DevRing>>
      rings_;
};

/// One rank's part of one call on the device and on the host.
struct RankCall {
  plan::Program program;
  exec::dev::DevProgram lowered;
  std::unique_ptr<exec::cuda::ProgramUpload> upload;
  exec::cuda::DeviceBuffer devA, devB, devScratch;  ///< device allocations
  std::vector<uint8_t> hostA, hostB, hostScratch;   ///< the host reference's copies
  size_t inOff = 0, outOff = 0;  ///< offsets of input and output in A (or B: outInB)
  bool outInB = false;
  exec::dev::DevCall call;  ///< the device call (program + buffers)
};

/// One call prepared on every rank: programs, buffers with their initial
/// bytes (device and host alike), device uploads bound to `rings`.
std::vector<RankCall> prepareCall(const ExecCase& c, DeviceRings& rings, uint64_t seed);

/// Runs the host reference of prepared calls (every rank's program on
/// thread ranks over loopback links of c.ringBytes).
void runHostReference(const ExecCase& c, std::vector<RankCall>& calls);

/// A rank's device launch state: its stream and control block.
struct RankLaunch {
  exec::cuda::Stream stream;
  exec::cuda::MappedControl ctl;
};

/// Launches perRank[r] (a group of calls) for every rank r in `ranks` on its
/// own stream, all before waiting, then waits up to `seconds` for all of
/// them; on a deadline raises every abort flag and fails. Returns "" or a
/// description of every rank's failure status.
std::string launchAndWait(const std::vector<std::vector<exec::dev::DevCall>>& perRank,
                          std::vector<std::unique_ptr<RankLaunch>>& launches,
                          exec::cuda::LaunchMode mode, double seconds = 60.0);

/// Compares the device allocations of every rank with the host reference;
/// returns "" or the mismatches.
std::string compareWithHost(const ExecCase& c, const std::vector<RankCall>& calls);

/// Prepares, runs on the host and on the device, and compares one case.
/// Returns "" or what went wrong.
std::string runCase(const ExecCase& c, uint64_t seed);

/// Polls until `stream` is done or `seconds` pass; true if done.
bool waitStream(void* stream, double seconds);

}  // namespace grove::gputest
