// process_group_grove.cc - rendezvous, lifetime, and the reducing and
// point-to-point operations of ProcessGroupGrove (the gathering ones are in
// process_group_gather.cc; process_group_grove.h says how it all works).
#include "process_group_grove.h"

#include "staging.h"

#include <cstring>

namespace grove::pytorch {

c10::intrusive_ptr<ProcessGroupGrove> ProcessGroupGrove::create(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  TORCH_CHECK(store, "grove: the process group needs a store");
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "grove: rank ", rank,
              " out of range for a group of ", size);
  groveUniqueId id;
  if (rank == 0) {
    groveResult_t r = groveGetUniqueId(&id);
    TORCH_CHECK(r == groveSuccess, "grove: groveGetUniqueId failed: ", groveGetErrorString(r), " (",
                groveGetLastError(nullptr), ")");
    const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
    store->set(kUniqueIdKey, std::vector<uint8_t>(bytes, bytes + GROVE_UNIQUE_ID_BYTES));
  } else {
    std::vector<uint8_t> bytes = store->get(kUniqueIdKey);  // waits up to the store's timeout
    TORCH_CHECK(bytes.size() == GROVE_UNIQUE_ID_BYTES, "grove: the store's ", kUniqueIdKey, " holds ",
                bytes.size(), " bytes, expected ", GROVE_UNIQUE_ID_BYTES);
    std::memcpy(id.internal, bytes.data(), GROVE_UNIQUE_ID_BYTES);
  }
  groveConfig_t config = GROVE_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMsOf(timeout);
  config.commName = "torch";
  groveComm_t comm = nullptr;
  groveResult_t r = groveCommInitRankConfig(&comm, size, id, rank, &config);
  TORCH_CHECK(r == groveSuccess, "grove: joining the communicator (rank ", rank, " of ", size,
              ") failed: ", groveGetErrorString(r), " (", groveGetLastError(nullptr), ")");
  return c10::make_intrusive<ProcessGroupGrove>(store, rank, size, comm, timeout);
}

ProcessGroupGrove::ProcessGroupGrove(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                     int size, groveComm_t comm, std::chrono::milliseconds timeout)
    : BackendBase(rank, size),
      comm_(std::make_shared<SharedComm>(comm)),
      timeout_(timeout),
      p2p_(std::make_shared<P2P>(store, rank, size, timeout)) {
  std::weak_ptr<P2P> p2p = p2p_;
  comm_->setAbortHook([p2p](const std::string& why) {
    if (auto p = p2p.lock()) p->abort(why);
  });
}

ProcessGroupGrove::~ProcessGroupGrove() {
  queue_.stop();
  runBlocking([this] { p2p_->stop(); });
  comm_->destroy();
}

c10::intrusive_ptr<GroveWork> ProcessGroupGrove::newWork(::c10d::OpType type, const char* name,
                                                         std::vector<at::Tensor> outputs,
                                                         std::chrono::milliseconds timeout) {
  return c10::make_intrusive<GroveWork>(getRank(), type, name, std::move(outputs), timeout, comm_);
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
                                                            Job job) {
  auto work = newWork(type, name, std::move(outputs), timeout);
  queue_.push(work, std::move(job));
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::broadcast(std::vector<at::Tensor>& tensors,
                                                              const ::c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast");
  int root = checkRoot(opts.rootRank, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "grove: broadcast: rootTensor must be 0 (one tensor per process)");
  auto comm = comm_;
  Staged s = Staged::of(t, getRank() == root);
  return enqueue(::c10d::OpType::BROADCAST, "broadcast", {t}, opTimeout(opts.timeout), [=]() mutable {
    comm->check(groveBroadcast(s.ptr(), s.ptr(), countOf(t), groveTypeOf(t, "broadcast"), root,
                               comm->get(), nullptr),
                "broadcast");
    s.copyBack();
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::allreduce(std::vector<at::Tensor>& tensors,
                                                              const ::c10d::AllreduceOptions& opts) {
  at::Tensor t = single(tensors, "allreduce");
  groveRedOp_t op = groveOpOf(opts.reduceOp, t, "allreduce");
  auto comm = comm_;
  Staged s = Staged::of(t, true);
  return enqueue(::c10d::OpType::ALLREDUCE, "allreduce", {t}, opTimeout(opts.timeout), [=]() mutable {
    comm->check(groveAllReduce(s.ptr(), s.ptr(), countOf(t), groveTypeOf(t, "allreduce"), op,
                               comm->get(), nullptr),
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
  auto comm = comm_;
  std::vector<at::Tensor> list = tensors;
  return enqueue(::c10d::OpType::ALLREDUCE_COALESCED, name, list, opTimeout(opts.timeout), [=] {
    std::vector<at::Tensor> flatParts;
    for (const auto& t : list) flatParts.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(flatParts);
    comm->check(groveAllReduce(flat.data_ptr(), flat.data_ptr(), countOf(flat),
                               groveTypeOf(flat, name), op, comm->get(), nullptr),
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
  auto comm = comm_;
  Staged s = Staged::of(t, true);
  return enqueue(::c10d::OpType::REDUCE, "reduce", {t}, opTimeout(opts.timeout), [=]() mutable {
    comm->check(groveReduce(s.ptr(), s.ptr(), countOf(t), groveTypeOf(t, "reduce"), op, root,
                            comm->get(), nullptr),
                "reduce");
    s.copyBack();
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::send(std::vector<at::Tensor>& tensors,
                                                         int dstRank, int tag) {
  at::Tensor t = single(tensors, "send");
  int peer = checkRoot(dstRank, "send");
  TORCH_CHECK(peer != getRank(), "grove: send: rank ", peer, " is this rank");
  auto work = newWork(::c10d::OpType::SEND, "send", {t}, timeout_);
  p2p_->send(work, Staged::of(t, true), peer, tag);
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::recv(std::vector<at::Tensor>& tensors,
                                                         int srcRank, int tag) {
  at::Tensor t = single(tensors, "recv");
  int peer = checkRoot(srcRank, "recv");
  TORCH_CHECK(peer != getRank(), "grove: recv: rank ", peer, " is this rank");
  auto work = newWork(::c10d::OpType::RECV, "recv", {t}, timeout_);
  p2p_->recv(work, Staged::of(t, false), peer, tag);
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                  int tag) {
  at::Tensor t = single(tensors, "recv");
  TORCH_CHECK(getSize() > 1, "grove: recv from any source needs another rank");
  auto work = newWork(::c10d::OpType::RECVANYSOURCE, "recv", {t}, timeout_);
  p2p_->recv(work, Staged::of(t, false), -1, tag);
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::barrier(const ::c10d::BarrierOptions& opts) {
  auto comm = comm_;
  return enqueue(::c10d::OpType::BARRIER, "barrier", {}, opTimeout(opts.timeout), [=] {
    uint8_t token = 0;
    comm->check(groveAllReduce(&token, &token, 1, groveUint8, groveMax, comm->get(), nullptr),
                "barrier");
  });
}

}  // namespace grove::pytorch
