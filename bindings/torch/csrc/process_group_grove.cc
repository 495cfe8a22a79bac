// process_group_grove.cc - rendezvous, lifetime, and the reducing and
// point-to-point operations of ProcessGroupGrove (the gathering ones are in
// process_group_gather.cc; process_group_grove.h says how it all works).
#include "process_group_grove.h"

#include "staging.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <set>
#include <thread>

namespace grove::pytorch {

namespace {

// What torch's profiler calls an operation (gloo's and NCCL's names).
const char* profiledOpName(::c10d::OpType type) {
  using T = ::c10d::OpType;
  switch (type) {
    case T::BROADCAST: return "broadcast";
    case T::ALLREDUCE:
    case T::ALLREDUCE_COALESCED: return "all_reduce";
    case T::REDUCE: return "reduce";
    case T::ALLGATHER:
    case T::ALLGATHER_COALESCED: return "all_gather";
    case T::_ALLGATHER_BASE: return "all_gather_into_tensor";
    case T::GATHER: return "gather";
    case T::SCATTER: return "scatter";
    case T::REDUCE_SCATTER: return "reduce_scatter";
    case T::_REDUCE_SCATTER_BASE: return "reduce_scatter_tensor";
    case T::ALLTOALL_BASE:
    case T::ALLTOALL: return "all_to_all";
    case T::SEND: return "send";
    case T::RECV: return "recv";
    case T::RECVANYSOURCE: return "recvAnySource";
    case T::BARRIER: return "barrier";
    case T::COALESCED: return "coalesced";
    default: return "unknown";
  }
}

// "<name>:<op>" as a string that lives as long as the process (the profiler
// may hold it past the process group).
const char* profilingTitle(const std::string& name, ::c10d::OpType type) {
  static std::mutex mu;
  static auto* titles = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return titles->insert(name + ":" + profiledOpName(type)).first->c_str();
}

// The communicator's own no-progress timeout is the group's plus a margin,
// so that Work::wait() (the operation's timeout) reports first, in gloo's
// words; grove's still ends a call nobody waits for.
std::chrono::milliseconds commTimeoutOf(std::chrono::milliseconds groupTimeout) {
  return groupTimeout + std::max(std::chrono::milliseconds(1000), groupTimeout / 10);
}

}  // namespace

c10::intrusive_ptr<ProcessGroupGrove> ProcessGroupGrove::create(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, const std::string& profilingName) {
  TORCH_CHECK(store, "grove: the process group needs a store");
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "grove: rank ", rank,
              " out of range for a group of ", size);
  groveConfig_t config = GROVE_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMsOf(commTimeoutOf(timeout));
  config.commName = "torch";
  groveComm_t comm = joinGroup(store, kUniqueIdKey, rank, size, config, "the communicator");
  return c10::make_intrusive<ProcessGroupGrove>(store, rank, size, comm, timeout, profilingName);
}

ProcessGroupGrove::ProcessGroupGrove(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                     int size, groveComm_t comm, std::chrono::milliseconds timeout,
                                     const std::string& profilingName)
    : BackendBase(rank, size),
      store_(store),
      comm_(std::make_shared<SharedComm>(comm)),
      timeout_(timeout),
      // at shutdown, queued sends get at most this long to go out
      p2p_(std::make_shared<P2P>(store, rank, size,
                                 std::min(timeout, std::chrono::milliseconds(5000)))),
      profilingName_(profilingName) {
  std::weak_ptr<P2P> p2p = p2p_;
#if GROVE_TORCH_CUDA_PATH
  std::weak_ptr<SharedComm> host = comm_;
  cuda_ = std::make_shared<CudaComms>(store, rank, size, commTimeoutOf(timeout),
                                      [host](const std::string& why) {
                                        if (auto h = host.lock()) h->abort(why);
                                      });
  std::weak_ptr<CudaComms> cuda = cuda_;
  comm_->setAbortHook([p2p, cuda](const std::string& why) {
    if (auto p = p2p.lock()) p->abort(why);
    if (auto c = cuda.lock()) c->abort(why);
  });
#else
  comm_->setAbortHook([p2p](const std::string& why) {
    if (auto p = p2p.lock()) p->abort(why);
  });
#endif
}

ProcessGroupGrove::~ProcessGroupGrove() {
  queue_.stop();
  runBlocking([this] { p2p_->stop(); });
#if GROVE_TORCH_CUDA_PATH
  // Waits for the GPU work in flight (unless a Work still holds it).
  runBlocking([this] { cuda_.reset(); });
#endif
  comm_->destroy();
}

void ProcessGroupGrove::abort() {
  comm_->abort("abort() was called on rank " + std::to_string(rank_));
}

#if GROVE_TORCH_SPLIT
c10::intrusive_ptr<::c10d::Backend> ProcessGroupGrove::split(
    const c10::intrusive_ptr<::c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  auto at = std::find(sorted.begin(), sorted.end(), rank_);
  if (at == sorted.end()) return nullptr;
  const int newRank = static_cast<int>(at - sorted.begin());
  const std::chrono::milliseconds timeout =
      opts && opts->timeout.count() > 0 ? opts->timeout : timeout_;
  return create(store, newRank, static_cast<int>(sorted.size()), timeout, profilingName_);
}
#endif

#if GROVE_TORCH_SHRINK
c10::intrusive_ptr<::c10d::Backend> ProcessGroupGrove::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<Options>& opts) {
  TORCH_CHECK((shrink_flags & ~1) == 0, "grove: unknown shrink flags ", shrink_flags);
  std::vector<int> excluded(ranks_to_exclude.begin(), ranks_to_exclude.end());
  groveComm_t parent = comm_->get();
  TORCH_CHECK(parent != nullptr, "grove: shrink of an aborted or destroyed process group",
              comm_->aborted() ? " (" + comm_->abortReason() + ")" : std::string());
  groveComm_t child = nullptr;
  const groveResult_t r =
      groveCommShrink(parent, excluded.data(), static_cast<int>(excluded.size()), &child, nullptr,
                      (shrink_flags & 1) != 0 ? GROVE_SHRINK_ABORT : GROVE_SHRINK_DEFAULT);
  TORCH_CHECK(r == groveSuccess && child != nullptr,
              "grove: shrink failed: ", groveGetLastError(parent));
  if ((shrink_flags & 1) != 0) comm_->abort("the group was shrunk with SHRINK_ABORT");
  int newRank = 0, newSize = 0;
  groveCommUserRank(child, &newRank);
  groveCommCount(child, &newSize);
  // The survivors count this group's shrinks alike: each shrunk group's
  // send/recv and CUDA links meet under their own prefix of the store.
  auto store = c10::make_intrusive<::c10d::PrefixStore>(
      "grove/shrink/" + std::to_string(++shrinks_), store_);
  const std::chrono::milliseconds timeout =
      opts && opts->timeout.count() > 0 ? opts->timeout : timeout_;
  return c10::make_intrusive<ProcessGroupGrove>(store, newRank, newSize, child, timeout,
                                                profilingName_);
}
#endif

c10::intrusive_ptr<GroveWork> ProcessGroupGrove::newWork(::c10d::OpType type, const char* name,
                                                         std::vector<at::Tensor> outputs,
                                                         std::chrono::milliseconds timeout,
                                                         const std::vector<at::Tensor>& inputs) {
  using T = ::c10d::OpType;
  if (type != T::SEND && type != T::RECV && type != T::RECVANYSOURCE) seq_.fetch_add(1);
  const std::vector<at::Tensor>& recorded = inputs.empty() ? outputs : inputs;
  return c10::make_intrusive<GroveWork>(getRank(), type, name, outputs, timeout, comm_,
                                        profilingTitle(profilingName_, type), recorded);
}

std::chrono::milliseconds ProcessGroupGrove::opTimeout(std::chrono::milliseconds requested) const {
  return requested.count() >= 0 ? requested : timeout_;
}

int ProcessGroupGrove::checkRoot(int64_t root, const char* op) const {
  TORCH_CHECK(root >= 0 && root < getSize(), "grove: ", op, ": root rank ", root,
              " out of range [0,", getSize(), ")");
  return static_cast<int>(root);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::enqueue(::c10d::OpType type, const char* name,
                                                            std::vector<at::Tensor> outputs,
                                                            std::chrono::milliseconds timeout,
                                                            Job job,
                                                            const std::vector<at::Tensor>& inputs) {
  std::optional<c10::Device> cuda;
  for (const std::vector<at::Tensor>* list :
       std::initializer_list<const std::vector<at::Tensor>*>{&outputs, &inputs})
    for (const auto& t : *list)
      if (!cuda && t.defined() && t.is_cuda()) cuda = t.device();
  if (cuda)
    return enqueueCuda(type, name, std::move(outputs), timeout, std::move(job), inputs, *cuda,
                       kCollectiveLane);
  auto work = newWork(type, name, std::move(outputs), timeout, inputs);
  auto comm = comm_;
  queue_.push(work, [job = std::move(job), comm] { job(Exec{comm.get(), nullptr}); });
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::enqueueCuda(
    ::c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
    std::chrono::milliseconds timeout, Job job, const std::vector<at::Tensor>& inputs,
    const c10::Device& device, CudaLane lane, bool blocksHost) {
#if GROVE_TORCH_CUDA_PATH
  using T = ::c10d::OpType;
  if (type != T::SEND && type != T::RECV && type != T::RECVANYSOURCE) seq_.fetch_add(1);
  cuda_->bind(device);
  CudaComms::Op op{
      type, name,      profilingTitle(profilingName_, type), std::move(outputs), inputs, timeout,
      lane, blocksHost};
  return cuda_->run(getRank(), std::move(op), std::move(job));
#else
  TORCH_CHECK(false, "grove: ", name,
              ": CUDA tensors need grove.torch built against torch 2.5 or "
              "later (this one was built against torch ",
              TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ")");
#endif
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::broadcast(
    std::vector<at::Tensor>& tensors, const ::c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast");
  int root = checkRoot(opts.rootRank, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0,
              "grove: broadcast: rootTensor must be 0 (one tensor per process)");
  Staged s = Staged::of(t, getRank() == root);
  return enqueue(::c10d::OpType::BROADCAST, "broadcast", {t}, opTimeout(opts.timeout),
                 [=](const Exec& x) mutable {
                   x.check(groveBroadcast(s.ptr(), s.ptr(), countOf(t), groveTypeOf(t, "broadcast"),
                                          root, x.comm(), x.stream),
                           "broadcast");
                   s.copyBack();
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::allreduce(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "grove: allreduce takes one tensor per process (got ",
              tensors.size(), ")");
  if (tensors[0].defined() && tensors[0].is_sparse()) return allreduceSparse(tensors[0], opts);
  using Op = ::c10d::ReduceOp;
  const auto kind = opts.reduceOp.op_;
  if ((kind == Op::BAND || kind == Op::BOR || kind == Op::BXOR) &&
      !(tensors[0].defined() && tensors[0].scalar_type() == at::kBool && kind != Op::BXOR))
    return allreduceBitwise(tensors[0], opts);
  at::Tensor t = single(tensors, "allreduce");
  groveRedOp_t op = groveOpOf(opts.reduceOp, t, "allreduce");
  Staged s = Staged::of(t, true);
  return enqueue(::c10d::OpType::ALLREDUCE, "allreduce", {t}, opTimeout(opts.timeout),
                 [=](const Exec& x) mutable {
                   x.check(groveAllReduce(s.ptr(), s.ptr(), countOf(t), groveTypeOf(t, "allreduce"),
                                          op, x.comm(), x.stream),
                           "allreduce");
                   s.copyBack();
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) {
  const char* name = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "grove: ", name, " needs at least one tensor");
  for (const auto& t : tensors) checkLike(t, tensors[0], t.numel(), name, "every tensor");
  groveRedOp_t op = groveOpOf(opts.reduceOp, tensors[0], name);
  std::vector<at::Tensor> list = tensors;
  return enqueue(::c10d::OpType::ALLREDUCE_COALESCED, name, list, opTimeout(opts.timeout),
                 [=](const Exec& x) {
                   std::vector<at::Tensor> flatParts;
                   for (const auto& t : list) flatParts.push_back(t.reshape({-1}));
                   at::Tensor flat = at::cat(flatParts);
                   x.check(groveAllReduce(flat.data_ptr(), flat.data_ptr(), countOf(flat),
                                          groveTypeOf(flat, name), op, x.comm(), x.stream),
                           name);
                   int64_t offset = 0;
                   for (const auto& t : list) {
                     t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
                     offset += t.numel();
                   }
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::reduce(std::vector<at::Tensor>& tensors,
                                                           const ::c10d::ReduceOptions& opts) {
  at::Tensor t = single(tensors, "reduce");
  int root = checkRoot(opts.rootRank, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "grove: reduce: rootTensor must be 0 (one tensor per process)");
  groveRedOp_t op = groveOpOf(opts.reduceOp, t, "reduce");
  Staged s = Staged::of(t, true);
  return enqueue(::c10d::OpType::REDUCE, "reduce", {t}, opTimeout(opts.timeout),
                 [=](const Exec& x) mutable {
                   x.check(groveReduce(s.ptr(), s.ptr(), countOf(t), groveTypeOf(t, "reduce"), op,
                                       root, x.comm(), x.stream),
                           "reduce");
                   s.copyBack();
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::send(std::vector<at::Tensor>& tensors,
                                                         int dstRank, int tag) {
  at::Tensor t = single(tensors, "send");
  int peer = checkRoot(dstRank, "send");
  TORCH_CHECK(peer != getRank(), "grove: send: rank ", peer, " is this rank");
  if (t.is_cuda()) {
    Staged s = Staged::of(t, true);
    return enqueueCuda(
        ::c10d::OpType::SEND, "send", {t}, timeout_,
        [=](const Exec& x) {
          x.check(groveSend(s.ptr(), countOf(t), groveTypeOf(t, "send"), peer, x.comm(), x.stream),
                  "send");
        },
        {}, t.device(), peer > getRank() ? kUpwardLane : kDownwardLane);
  }
  auto work = newWork(::c10d::OpType::SEND, "send", {t}, timeout_);
  p2p_->send(work, Staged::of(t, true), peer, tag);
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::recv(std::vector<at::Tensor>& tensors,
                                                         int srcRank, int tag) {
  at::Tensor t = single(tensors, "recv");
  int peer = checkRoot(srcRank, "recv");
  TORCH_CHECK(peer != getRank(), "grove: recv: rank ", peer, " is this rank");
  if (t.is_cuda()) {
    Staged s = Staged::of(t, false);
    return enqueueCuda(
        ::c10d::OpType::RECV, "recv", {t}, timeout_,
        [=](const Exec& x) mutable {
          x.check(groveRecv(s.ptr(), countOf(t), groveTypeOf(t, "recv"), peer, x.comm(), x.stream),
                  "recv");
          s.copyBack();
        },
        {}, t.device(), peer < getRank() ? kUpwardLane : kDownwardLane);
  }
  auto work = newWork(::c10d::OpType::RECV, "recv", {t}, timeout_);
  p2p_->recv(work, Staged::of(t, false), peer, tag);
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                  int tag) {
  at::Tensor t = single(tensors, "recv");
  TORCH_CHECK(getSize() > 1, "grove: recv from any source needs another rank");
  TORCH_CHECK(!t.is_cuda(),
              "grove: recv from any source takes CPU tensors (a CUDA recv names its "
              "source rank, as with NCCL)");
  auto work = newWork(::c10d::OpType::RECVANYSOURCE, "recv", {t}, timeout_);
  p2p_->recv(work, Staged::of(t, false), -1, tag);
  return work;
}

// monitored_barrier, as gloo has it: every rank but 0 sends rank 0 a token
// on its point-to-point link and waits for rank 0's answer; rank 0 takes the
// tokens within the timeout and answers every rank once all came. Rank 0
// names the first rank that did not come (every such rank with
// waitAllRanks); the others then time out waiting for the answer and say
// so. Nothing is aborted: the group stays usable.
void ProcessGroupGrove::monitoredBarrier(const ::c10d::BarrierOptions& opts, bool waitAllRanks) {
  constexpr int kTag = INT32_MIN + 1;  // a tag no caller uses
  const auto timeout = opTimeout(opts.timeout);
  const int me = getRank(), n = getSize();
  using T = ::c10d::OpType;
  if (n == 1) return;
  if (me != 0) {
    at::Tensor token = at::zeros({1}, at::kByte), answer = at::zeros({1}, at::kByte);
    auto sent = newWork(T::SEND, "monitored_barrier", {token}, timeout);
    p2p_->send(sent, Staged::of(token, true), 0, kTag);
    auto got = newWork(T::RECV, "monitored_barrier", {answer}, timeout);
    p2p_->recv(got, Staged::of(answer, false), 0, kTag);
    const bool done = got->completesWithin(timeout);
    if (!done) p2p_->cancel(got);
    try {
      if (done) got->wait(timeout);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "Rank ", me,
                  " successfully reached monitoredBarrier, but received errors while "
                  "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank. (",
                  e.what(), ")");
    }
    TORCH_CHECK(
        done, "Rank ", me,
        " successfully reached monitoredBarrier, but received errors while waiting "
        "for send/recv from rank 0. Please check rank 0 logs for faulty rank. (no answer within ",
        timeout.count(), " ms)");
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<c10::intrusive_ptr<GroveWork>> tokens(n);
  for (int r = 1; r < n; ++r) {
    at::Tensor token = at::zeros({1}, at::kByte);
    tokens[r] = newWork(T::RECV, "monitored_barrier", {token}, timeout);
    p2p_->recv(tokens[r], Staged::of(token, false), r, kTag);
  }
  std::vector<int> failed;
  for (int r = 1; r < n; ++r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 && !waitAllRanks && !tokens[r]->isCompleted()) {
      for (int q = 1; q < n; ++q) p2p_->cancel(tokens[q]);
      TORCH_CHECK(false, "Rank 0 timed out in monitoredBarrier after ", timeout.count(),
                  " ms (ranks 1..", r - 1, " passed; rank ", r, " and later were not checked)");
    }
    bool came = tokens[r]->completesWithin(std::max(left, std::chrono::milliseconds(0)));
    if (came) {
      try {
        tokens[r]->wait(timeout);
      } catch (const std::exception&) {
        came = false;
      }
    }
    if (came) continue;
    p2p_->cancel(tokens[r]);
    failed.push_back(r);
    if (!waitAllRanks) break;
  }
  if (!failed.empty()) {
    for (int r = 1; r < n; ++r) p2p_->cancel(tokens[r]);
    std::string ranks;
    for (int r : failed) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    TORCH_CHECK(false, failed.size() == 1 ? "Rank " : "Ranks ", ranks,
                " failed to pass monitoredBarrier in ", timeout.count(), " ms");
  }
  for (int r = 1; r < n; ++r) {
    at::Tensor answer = at::zeros({1}, at::kByte);
    p2p_->send(newWork(T::SEND, "monitored_barrier", {answer}, timeout), Staged::of(answer, true),
               r, kTag);
  }
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::barrier(const ::c10d::BarrierOptions& opts) {
#if GROVE_TORCH_CUDA_PATH
  // On the GPU when torch asks for it (barrier(device_ids=...)) or when the
  // group already carries CUDA tensors (torch passes "cpu" for a group that
  // serves both): a one-byte all-reduce on the CUDA communicator after the
  // work queued so far, whose wait() blocks the host, as NCCL's barrier does.
  std::optional<at::Device> device = opts.device;
  if (!opts.device_ids.empty())
    device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(opts.device_ids[0]));
  const std::optional<at::Device> bound = cuda_->device();
  if (!device || !device->is_cuda())
    device = bound;
  else if (!device->has_index())
    device = bound ? *bound
                   : at::Device(at::kCUDA,
                                c10::impl::getDeviceGuardImpl(at::kCUDA)->getDevice().index());
  if (device && device->is_cuda()) {
    at::Tensor token = at::zeros({1}, at::TensorOptions().dtype(at::kByte).device(*device));
    return enqueueCuda(
        ::c10d::OpType::BARRIER, "barrier", {token}, opTimeout(opts.timeout),
        [=](const Exec& x) {
          x.check(groveAllReduce(token.data_ptr(), token.data_ptr(), 1, groveUint8, groveMax,
                                 x.comm(), x.stream),
                  "barrier");
        },
        {}, *device, kCollectiveLane, /*blocksHost=*/true);
  }
#endif
  return enqueue(
      ::c10d::OpType::BARRIER, "barrier", {}, opTimeout(opts.timeout), [=](const Exec& x) {
        uint8_t token = 0;
        x.check(groveAllReduce(&token, &token, 1, groveUint8, groveMax, x.comm(), x.stream),
                "barrier");
      });
}

}  // namespace grove::pytorch
