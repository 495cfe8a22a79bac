// OneSided over the net transport's NICs (net_core.h): registered regions,
// puts with a signal, completions.
#include "transports/net/net_core.h"

namespace grove::transport::net {

namespace {

// OneSided over the NICs: regions on NIC 0, puts from the NIC that pairs
// with the region's (nic mod this rank's NICs), signals under link id 0.
class NetOneSided final : public OneSided {
 public:
  explicit NetOneSided(NetCore& core) : core_(core) {}
  Remote expose(void* base, size_t bytes) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    const Region r = core_.nic(0).registerMemory(base, bytes);
    Remote out;
    out.addr =
        r.remoteBase + (reinterpret_cast<uintptr_t>(base) - reinterpret_cast<uintptr_t>(r.base));
    out.key = r.key;
    out.bytes = bytes;
    out.rank = core_.ctx().rank;
    out.nic = 0;
    return out;
  }
  uint64_t put(const void* src, size_t n, const Remote& dst, uint64_t offset,
               uint32_t signal) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    if (offset > dst.bytes || n > dst.bytes - offset)
      throwInvalidArgument("net put: " + std::to_string(n) + " bytes at offset " +
                           std::to_string(offset) + " do not fit the " + std::to_string(dst.bytes) +
                           "-byte region");
    if (signal > kMaxSignal) throwInvalidArgument("net put: signal above kMaxSignal");
    if (!core_.reaches(dst.rank) || dst.nic < 0 || dst.nic >= core_.peerNics(dst.rank))
      throwInvalidArgument("net put: region of an unreachable rank or NIC");
    core_.progress();
    const int local = dst.nic % static_cast<int>(core_.nics().size());
    Nic& nic = core_.nic(local);
    // A signal alone moves no byte: nothing to register (src may be null).
    // The put holds its source's registration until the write completes.
    auto op = std::make_unique<WriteOp>();
    const Region from = n == 0 ? Region{} : nic.registerMemory(const_cast<void*>(src), n);
    if (n > 0) op->sourceNic = &nic, op->sourceKey = from.key;
    Region to;
    to.remoteBase = dst.addr;
    to.key = dst.key;
    op->owner = nullptr;
    op->bytes = n == 0 ? 1 : n;  // nonzero while in flight
    bool posted = false;
    try {
      posted = nic.write(src, n, from, core_.addrOf(local, dst.rank, dst.nic), to, offset, signal,
                         op.get());
    } catch (...) {
      if (n > 0) nic.unref(from.key);
      throw;
    }
    if (!posted) {
      if (n > 0) nic.unref(from.key);
      return 0;
    }
    const uint64_t id = core_.nextPut_++;
    core_.puts_[id] = std::move(op);
    return id;
  }
  bool done(uint64_t op) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    auto it = core_.puts_.find(op);
    if (it == core_.puts_.end()) return true;
    if (it->second->bytes != 0) core_.progress();
    if (it->second->bytes != 0) return false;
    core_.puts_.erase(it);
    return true;
  }
  bool takeSignal(uint32_t* signal) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    if (core_.signals_.empty()) core_.progress();
    if (core_.signals_.empty()) return false;
    *signal = core_.signals_.front();
    core_.signals_.pop_front();
    return true;
  }
  bool flush() override {
    std::lock_guard<std::mutex> lock(core_.mu);
    core_.progress();
    for (const auto& [id, op] : core_.puts_)
      if (op->bytes != 0) return false;
    return true;
  }
  void unexpose(const Remote& r) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    if (r.bytes == 0 || r.nic < 0 || r.nic >= static_cast<int>(core_.nics().size())) return;
    core_.nic(r.nic).unref(r.key);
  }
  void release(void* base) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    for (const auto& n : core_.nics()) n->drop(base);
  }
  size_t registrations() const override { return sum(&Nic::registrations); }
  size_t registrationHits() const override { return sum(&Nic::registrationHits); }

 private:
  size_t sum(size_t (Nic::*counter)() const) const {
    std::lock_guard<std::mutex> lock(core_.mu);
    size_t s = 0;
    for (const auto& n : core_.nics()) s += ((*n).*counter)();
    return s;
  }
  NetCore& core_;
};

}  // namespace

std::unique_ptr<OneSided> makeNetOneSided(NetCore& core) {
  return std::make_unique<NetOneSided>(core);
}

}  // namespace grove::transport::net
