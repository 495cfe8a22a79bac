// gloo_perf: the peer harness for Gloo (the engine of PyTorch's CPU backend),
// started by any launcher that sets rank variables:
//
//   grove-launch -n 4 build/compare/gloo_perf all_reduce --store /tmp/s -b 8 -e 128M -f 4
//
// How it works: the rank and size come from GROVE_RANK/GROVE_NRANKS
// (grove-launch), OMPI_COMM_WORLD_RANK/_SIZE (Open MPI), PMI_RANK/PMI_SIZE
// (MPICH) or RANK/WORLD_SIZE (torchrun). Ranks meet through a FileStore in
// --store DIR (default /tmp/grove-gloo-<uid>-<parent pid>; the launcher is
// every rank's parent), under a key prefix unique to the job, and connect a
// full mesh over the TCP device bound to --iface (default lo: 127.0.0.1).
// Each call builds its options and buffers as PyTorch's ProcessGroupGloo
// does and runs gloo::allreduce (ring), gloo::broadcast, gloo::allgather or
// gloo::reduce; a call with no input buffer is Gloo's in-place form. Gloo
// has no reduce-scatter in this API, no avg op, and fp16 only, no bfloat16.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/broadcast.h"
#include "gloo/config.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "perf/compare/peer_harness.h"

namespace grove::perf::compare {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn reduceFnOf(groveRedOp_t op) {
  switch (op) {
    case groveSum: return &gloo::sum<T>;
    case groveProd: return &gloo::product<T>;
    case groveMax: return &gloo::max<T>;
    case groveMin: return &gloo::min<T>;
    default: return nullptr;
  }
}

ReduceFn reduceFn(groveDataType_t type, groveRedOp_t op) {
  switch (type) {
    case groveInt8: return reduceFnOf<int8_t>(op);
    case groveUint8: return reduceFnOf<uint8_t>(op);
    case groveInt32: return reduceFnOf<int32_t>(op);
    case groveUint32: return reduceFnOf<uint32_t>(op);
    case groveInt64: return reduceFnOf<int64_t>(op);
    case groveUint64: return reduceFnOf<uint64_t>(op);
    case groveFloat16: return reduceFnOf<gloo::float16>(op);
    case groveFloat32: return reduceFnOf<float>(op);
    case groveFloat64: return reduceFnOf<double>(op);
    default: return nullptr;
  }
}

/// First of the variables that is set, as an int; -1 when none is.
int envInt(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v != nullptr && *v) return std::atoi(v);
  return -1;
}

/// A key prefix that every rank of this job computes alike and no other job does.
std::string jobKey() {
  std::string key = "job-" + std::to_string(getppid());
  for (const char* n : {"GROVE_COMM_ID", "MASTER_PORT", "OMPI_MCA_orte_hnp_uri", "PMI_PORT"})
    if (const char* v = std::getenv(n); v != nullptr && *v) return key + "-" + v;
  return key;
}

/// Gloo over its TCP device, with a FileStore rendezvous.
class GlooBackend : public PeerBackend {
 public:
  explicit GlooBackend(const PeerOptions& o) : opts_(o) {}

  void start() override {
    rank_ = envInt({"GROVE_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"});
    nranks_ = envInt({"GROVE_NRANKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"});
    if (rank_ < 0 || nranks_ < 1 || rank_ >= nranks_)
      throw std::runtime_error("no rank variables (start under grove-launch, mpirun or torchrun)");
    if (opts_.storeDir.empty())
      opts_.storeDir =
          "/tmp/grove-gloo-" + std::to_string(getuid()) + "-" + std::to_string(getppid());
    std::filesystem::create_directories(opts_.storeDir);
    gloo::transport::tcp::attr attr;
    attr.iface = opts_.iface.empty() ? "lo" : opts_.iface;
    attr.ai_family = AF_INET;
    device_ = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore fileStore(opts_.storeDir);
    gloo::rendezvous::PrefixStore store(jobKey(), fileStore);
    context_ = std::make_shared<gloo::rendezvous::Context>(rank_, nranks_);
    context_->setTimeout(std::chrono::seconds(120));
    context_->connectFullMesh(store, device_);
  }

  void stop() override {
    int32_t v = 0;
    run(CollKind::kAllReduce, &v, &v, 1, groveInt32, groveSum, -1, true);  // all done with it
    context_.reset();
    device_.reset();
  }
  void abort() override {}
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  std::string describe() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
           "." + std::to_string(GLOO_VERSION_PATCH) + " (tcp device on " +
           (opts_.iface.empty() ? "lo" : opts_.iface) + ")";
  }

  std::string unsupported(CollKind kind, groveDataType_t type, groveRedOp_t op) const override {
    if (kind != CollKind::kAllReduce && kind != CollKind::kBroadcast &&
        kind != CollKind::kAllGather && kind != CollKind::kReduce)
      return "Gloo has no " + std::string(collName(kind)) + " in this harness";
    if (type == groveBfloat16) return "Gloo has no bfloat16";
    if (collHasOp(kind) && reduceFn(type, op) == nullptr) return "Gloo has no avg op";
    return "";
  }
  bool hasVariant(CollKind, bool) const override { return true; }

  void run(CollKind kind, const void* send, void* recv, size_t count, groveDataType_t type,
           groveRedOp_t op, int root, bool inPlace) override {
    if (count == 0) return;  // Gloo rejects empty calls; nothing moves anyway
    void* in = inPlace ? nullptr : const_cast<void*>(send);
    switch (type) {
      case groveInt8: return runTyped<int8_t>(kind, in, recv, count, op, root);
      case groveUint8: return runTyped<uint8_t>(kind, in, recv, count, op, root);
      case groveInt32: return runTyped<int32_t>(kind, in, recv, count, op, root);
      case groveUint32: return runTyped<uint32_t>(kind, in, recv, count, op, root);
      case groveInt64: return runTyped<int64_t>(kind, in, recv, count, op, root);
      case groveUint64: return runTyped<uint64_t>(kind, in, recv, count, op, root);
      case groveFloat16: return runTyped<gloo::float16>(kind, in, recv, count, op, root);
      case groveFloat32: return runTyped<float>(kind, in, recv, count, op, root);
      case groveFloat64: return runTyped<double>(kind, in, recv, count, op, root);
      default: throw std::runtime_error("unsupported type");
    }
  }

 private:
  // One call on elements of type T; in == nullptr is the in-place form.
  template <typename T>
  void runTyped(CollKind kind, void* in, void* recv, size_t count, groveRedOp_t op, int root) {
    T* src = static_cast<T*>(in);
    T* dst = static_cast<T*>(recv);
    switch (kind) {
      case CollKind::kAllReduce: {
        gloo::AllreduceOptions o(context_);
        if (src != nullptr) o.setInput(src, count);
        o.setOutput(dst, count);
        o.setReduceFunction(reduceFnOf<T>(op));
        gloo::allreduce(o);
        return;
      }
      case CollKind::kBroadcast: {
        gloo::BroadcastOptions o(context_);
        if (src != nullptr && rank_ == root) o.setInput(src, count);
        o.setOutput(dst, count);
        o.setRoot(root);
        gloo::broadcast(o);
        return;
      }
      case CollKind::kAllGather: {
        gloo::AllgatherOptions o(context_);
        if (src != nullptr) o.setInput(src, count);
        o.setOutput(dst, count * static_cast<size_t>(nranks_));
        gloo::allgather(o);
        return;
      }
      case CollKind::kReduce: return reduce(src, dst, count, op, root);
      default: throw std::runtime_error("unsupported collective");
    }
  }

  // gloo::reduce uses every rank's output as scratch; nccl-tests wants
  // recvbuff left alone off the root, so other ranks reduce into scratch_.
  template <typename T>
  void reduce(T* src, T* dst, size_t count, groveRedOp_t op, int root) {
    gloo::ReduceOptions o(context_);
    if (rank_ != root) {
      if (src == nullptr) src = dst;
      scratch_.resize(count * sizeof(T));
      dst = reinterpret_cast<T*>(scratch_.data());
    }
    if (src != nullptr) o.setInput(src, count);
    o.setOutput(dst, count);
    o.setRoot(root);
    o.setReduceFunction(reduceFnOf<T>(op));
    gloo::reduce(o);
  }

  PeerOptions opts_;
  int rank_ = 0;
  int nranks_ = 1;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::vector<char> scratch_;
};

std::unique_ptr<PeerBackend> makeGloo(const PeerOptions& o) {
  return std::make_unique<GlooBackend>(o);
}

}  // namespace
}  // namespace grove::perf::compare

int main(int argc, char** argv) {
  return grove::perf::compare::peerMain(argc, argv, grove::perf::compare::makeGloo);
}
