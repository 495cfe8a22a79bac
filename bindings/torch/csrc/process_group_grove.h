// process_group_grove.h - the "grove" torch.distributed backend.
//
// How it works: create() meets the other ranks through the c10d store torch
// hands to every backend (rank 0 makes grove's unique id and publishes it
// under kUniqueIdKey; the others read it), then joins a host communicator
// whose timeout is the process group's. Each collective checks its
// arguments on the calling thread (bad input raises at once), then queues a
// job on the OpQueue and returns its Work. A job calls grove's blocking API
// on contiguous buffers: tensors that are not contiguous, and list-of-tensor
// forms (allgather into a list, scatter from a list, ...), go through a flat
// staging buffer that the job copies in or out. Ops grove has no primitive
// for are built from ones it has: uneven all-to-all and the list forms of
// all-to-all are a group of sends and receives; barrier is a one-byte
// all-reduce. send/recv do not go through the queue: they run on their own
// per-direction links (p2p.h), so that they complete in any posting order,
// as gloo's do.
//
// CUDA tensors take the same job code down another path (cuda_path.h): the
// job runs at once on the calling thread, queued on a grove CUDA
// communicator's stream after the caller's current stream's work (NCCL's
// semantics); send and recv of CUDA tensors match in posting order per pair
// of ranks, tags aside, as NCCL's do.
#pragma once

#include "comm.h"
#include "compat.h"
#include "cuda_path.h"
#include "p2p.h"
#include "work.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace grove::pytorch {

/// Store key (under the store prefix torch gives each group) of rank 0's id.
inline constexpr const char* kUniqueIdKey = "grove/unique_id";

/// torch.distributed backend over a grove host communicator.
class ProcessGroupGrove : public BackendBase {
 public:
  /// Rendezvous through store and join the communicator (collective).
  /// profilingName prefixes what torch's profiler records ("grove:all_reduce"):
  /// the name torch knows the backend by.
  static c10::intrusive_ptr<ProcessGroupGrove> create(
      const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
      std::chrono::milliseconds timeout, const std::string& profilingName = "grove");
  /// Wraps a joined communicator; use create().
  ProcessGroupGrove(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                    groveComm_t comm, std::chrono::milliseconds timeout,
                    const std::string& profilingName);
  /// Finishes queued work, then leaves the communicator.
  ~ProcessGroupGrove() override;

  /// "grove".
  const std::string getBackendName() const override { return "grove"; }

  /// Stops the communicator at once on every rank: every pending Work fails
  /// with the reason, later calls are refused. Never waits for a peer.
  void abort() override;
#if GROVE_TORCH_SPLIT
  bool supportsSplitting() const override { return true; }
  /// What a split child starts from: this group's timeout.
  c10::intrusive_ptr<Options> getBackendOptions() override {
    return c10::make_intrusive<Options>("grove", timeout_);
  }
  /// dist.split_group: the members of `ranks` (ranks of this group) form a
  /// new group through `store` (torch namespaces it per child), ranked in
  /// the order of their ranks here; other ranks get null and take no part.
  c10::intrusive_ptr<::c10d::Backend> split(const c10::intrusive_ptr<::c10d::Store>& store,
                                            const std::vector<int>& ranks,
                                            const c10::intrusive_ptr<Options>& opts) override;
#endif
#if GROVE_TORCH_SHRINK
  bool supportsShrinking() const override { return true; }
  /// dist.shrink_group: groveCommShrink (flags 1 = abort mode: after a
  /// failure); only the ranks that stay call it.
  c10::intrusive_ptr<::c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude,
                                             int shrink_flags,
                                             const c10::intrusive_ptr<Options>& opts) override;
#endif

  /// In-place broadcast of one tensor from opts.rootRank.
  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override;
  /// In-place all-reduce of one tensor.
  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override;
  /// All-reduce of several tensors of one dtype through one flat buffer.
  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override;
  /// Reduce of one tensor to opts.rootRank (in place).
  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override;
  /// All-gather of one tensor into a list of size() tensors.
  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override;
  /// All-gather into one tensor of size() * input.numel() elements.
  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override;
  /// Gather of one tensor into a list on opts.rootRank.
  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override;
  /// Scatter of a list on opts.rootRank, one tensor to each rank.
  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  /// Reduce-scatter of a list of size() tensors into one.
  c10::intrusive_ptr<::c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override;
  /// Reduce-scatter of one tensor of size() * output.numel() elements.
  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) override;
  /// All-to-all along dim 0, even (empty split lists) or uneven.
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& outputSplits,
                                                 std::vector<int64_t>& inputSplits,
                                                 const ::c10d::AllToAllOptions& opts) override;
  /// All-to-all of lists: inputs[j] goes to rank j, outputs[j] comes from it.
  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
  /// Sends one tensor to dstRank; matched by a recv of the same tag.
  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                        int tag) override;
  /// Receives one tensor from srcRank, the next message of that tag.
  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                        int tag) override;
  /// Receives one tensor from whichever rank's message of that tag comes
  /// first (Work::sourceRank() names it).
  c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override;
  /// Completes when every rank reached the barrier.
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;
  /// A barrier that names the ranks that did not reach it within
  /// opts.timeout (rank 0 collects every rank's arrival; gloo's semantics).
  void monitoredBarrier(const ::c10d::BarrierOptions& opts, bool waitAllRanks) override;
  /// All-gather of several tensors of one dtype through one flat buffer:
  /// outputs[r][i] gets rank r's inputs[i].
  c10::intrusive_ptr<::c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override;
  /// _allgather_base of each (output, input) pair, as one operation.
  c10::intrusive_ptr<::c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override;
  /// _reduce_scatter_base of each (output, input) pair, as one operation.
  c10::intrusive_ptr<::c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override;
  /// Collectives issued so far (torch's per-group sequence number).
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  /// Starts the sequence at 0 (every rank does the same).
  void setSequenceNumberForGroup() override { seq_.store(0); }

 private:
  /// Makes the Work of one operation (inputs: what the profiler records;
  /// empty = outputs).
  c10::intrusive_ptr<GroveWork> newWork(::c10d::OpType type, const char* name,
                                        std::vector<at::Tensor> outputs,
                                        std::chrono::milliseconds timeout,
                                        const std::vector<at::Tensor>& inputs = {});
  /// Makes the Work of one operation and queues its job: on the host
  /// worker, or on the CUDA path when its tensors are on a GPU.
  c10::intrusive_ptr<::c10d::Work> enqueue(::c10d::OpType type, const char* name,
                                           std::vector<at::Tensor> outputs,
                                           std::chrono::milliseconds timeout, Job job,
                                           const std::vector<at::Tensor>& inputs = {});
  /// Runs a job on the CUDA path, on `device`'s `lane` (throws where the
  /// extension was built without it). blocksHost: wait() also blocks the
  /// host (barrier).
  c10::intrusive_ptr<::c10d::Work> enqueueCuda(::c10d::OpType type, const char* name,
                                               std::vector<at::Tensor> outputs,
                                               std::chrono::milliseconds timeout, Job job,
                                               const std::vector<at::Tensor>& inputs,
                                               const c10::Device& device, CudaLane lane,
                                               bool blocksHost = false);
  /// All-reduce by gathering every rank's tensor and combining them here,
  /// for what grove has no reduction for: sparse tensors (sum) and bitwise
  /// and/or/xor of integers (process_group_gathered.cc).
  c10::intrusive_ptr<::c10d::Work> allreduceSparse(at::Tensor& t,
                                                   const ::c10d::AllreduceOptions& opts);
  c10::intrusive_ptr<::c10d::Work> allreduceBitwise(at::Tensor& t,
                                                    const ::c10d::AllreduceOptions& opts);
  /// opts.timeout when set, else the group's.
  std::chrono::milliseconds opTimeout(std::chrono::milliseconds requested) const;
  /// Checks a root rank argument.
  int checkRoot(int64_t root, const char* op) const;

  c10::intrusive_ptr<::c10d::Store> store_;  ///< the group's store (shrunk groups use a prefix)
  int shrinks_ = 0;                          ///< shrinks of this group so far
  std::shared_ptr<SharedComm> comm_;         ///< shared with every Work
  std::chrono::milliseconds timeout_;        ///< the group's timeout
  std::shared_ptr<P2P> p2p_;                 ///< send and recv (aborted with comm_)
  std::string profilingName_;                ///< "grove", or the name torch knows us by
  std::atomic<uint64_t> seq_{0};             ///< collectives issued
#if GROVE_TORCH_CUDA_PATH
  std::shared_ptr<CudaComms> cuda_;  ///< CUDA tensors' communicators (joined on first use)
#endif
  OpQueue queue_;  ///< last member: its thread stops before the others go
};

}  // namespace grove::pytorch
