// Nic; see nic.h for how it works.
#include "transports/net/nic.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "base/error.h"
#include "base/log.h"

namespace grove::transport::net {
namespace {

void check(long rc, const char* what) {
  if (rc != 0) throw Error(groveSystemError, "net transport: " + fabricError(what, rc));
}

}  // namespace

Nic::Nic(const FabricLib& lib, const fi_info* info) : lib_(lib) {
  info_ = lib_.dupinfo(info);
  if (info_ == nullptr) throw Error(groveSystemError, "net transport: fi_dupinfo failed");
  try {
    provider_ = info_->fabric_attr->prov_name != nullptr ? info_->fabric_attr->prov_name : "?";
    name_ =
        provider_ + "/" + (info_->domain_attr->name != nullptr ? info_->domain_attr->name : "?");
    const uint64_t mr = info_->domain_attr->mr_mode;
    virtAddr_ = (mr & FI_MR_VIRT_ADDR) != 0;
    provKey_ = (mr & FI_MR_PROV_KEY) != 0;
    localMr_ = (mr & FI_MR_LOCAL) != 0;
    injectSize_ = info_->tx_attr->inject_size;
    const size_t dataBits = info_->domain_attr->cq_data_size >= 4 ? 20 : 0;
    if (dataBits == 0)
      throw Error(groveSystemError, "net transport: " + name_ + " has no 4-byte CQ data");
    maxWrite_ = std::min<size_t>((size_t{1} << 20) - 1, info_->ep_attr->max_msg_size);
    check(lib_.fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    fi_cq_attr cqAttr{};
    cqAttr.format = FI_CQ_FORMAT_DATA;
    cqAttr.size = 4096;
    cqAttr.wait_obj = FI_WAIT_NONE;
    check(fi_cq_open(domain_, &cqAttr, &cq_, nullptr), "fi_cq_open");
    fi_av_attr avAttr{};
    avAttr.type = FI_AV_TABLE;
    check(fi_av_open(domain_, &avAttr, &av_, nullptr), "fi_av_open");
    check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
    check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
    check(fi_enable(ep_), "fi_enable");
    size_t len = 256;
    address_.resize(len);
    check(fi_getname(&ep_->fid, address_.data(), &len), "fi_getname");
    address_.resize(len);
    recvSlots_.resize(kControlSlots);
    sendSlots_.resize(kControlSlots);
    for (auto& s : sendSlots_) s.send = true;
    recvRegion_ = registerMemory(recvSlots_.data(), recvSlots_.size() * sizeof(ControlSlot));
    sendRegion_ = registerMemory(sendSlots_.data(), sendSlots_.size() * sizeof(ControlSlot));
    for (int i = 0; i < kControlSlots; ++i) postReceive(i);
  } catch (...) {
    release();
    throw;
  }
}

Nic::~Nic() { release(); }

void Nic::release() {
  if (ep_ != nullptr) fi_close(&ep_->fid);
  ep_ = nullptr;
  for (auto& [at, r] : regs_)
    if (r.mr != nullptr) fi_close(&r.mr->fid);
  regs_.clear();
  if (av_ != nullptr) fi_close(&av_->fid);
  av_ = nullptr;
  if (cq_ != nullptr) fi_close(&cq_->fid);
  cq_ = nullptr;
  if (domain_ != nullptr) fi_close(&domain_->fid);
  domain_ = nullptr;
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  fabric_ = nullptr;
  if (info_ != nullptr) lib_.freeinfo(info_);
  info_ = nullptr;
}

fi_addr_t Nic::insert(const uint8_t* addr, size_t len) {
  (void)len;
  fi_addr_t out = FI_ADDR_UNSPEC;
  const int n = fi_av_insert(av_, addr, 1, &out, 0, nullptr);
  if (n != 1) throw Error(groveSystemError, "net transport: fi_av_insert failed on " + name_);
  return out;
}

Region Nic::registerMemory(void* base, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(base);
  // The cache: a cached registration starting at or before `base` that
  // contains the range (there are few: windows, staging, puts in flight).
  for (auto it = regs_.upper_bound(at); it != regs_.begin();) {
    --it;
    Reg& r = it->second;
    if (r.cached && at + bytes <= it->first + r.region.bytes) {
      ++hits_;
      ++r.refs;
      return r.region;
    }
  }
  Reg reg;
  const uint64_t access = FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
  check(fi_mr_reg(domain_, base, bytes, access, 0, provKey_ ? 0 : nextKey_++, 0, &reg.mr, nullptr),
        "fi_mr_reg");
  reg.region.base = base;
  reg.region.bytes = bytes;
  reg.region.desc = fi_mr_desc(reg.mr);
  reg.region.key = fi_mr_key(reg.mr);
  reg.region.remoteBase = virtAddr_ ? at : 0;
  reg.refs = 1;
  // A registration of the same address that is too small stays as it is:
  // its users (a window's peers) write with its key until they let go.
  regs_.emplace(at, reg);
  ++made_;
  return reg.region;
}

void Nic::closeIfUnused(std::multimap<uintptr_t, Reg>::iterator it) {
  if (it->second.refs > 0 || it->second.cached) return;
  if (it->second.mr != nullptr) fi_close(&it->second.mr->fid);
  regs_.erase(it);
}

void Nic::unref(uint64_t key) {
  // A live registration's key is unique in its domain.
  for (auto it = regs_.begin(); it != regs_.end(); ++it)
    if (it->second.region.key == key && it->second.refs > 0) {
      --it->second.refs;
      closeIfUnused(it);
      return;
    }
}

void Nic::drop(void* base) {
  const auto at = reinterpret_cast<uintptr_t>(base);
  for (auto [it, end] = regs_.equal_range(at); it != end;) {
    auto next = std::next(it);
    it->second.cached = false;
    closeIfUnused(it);
    it = next;
  }
}

bool Nic::write(const void* src, size_t n, const Region& local, fi_addr_t dst, const Region& remote,
                uint64_t offset, uint32_t signal, WriteOp* op) {
  const uint64_t raddr = remote.remoteBase + offset;
  const ssize_t rc = fi_writedata(ep_, src, n, local.desc, signal, dst, raddr, remote.key, &op->fi);
  if (rc == -FI_EAGAIN) return false;
  if (rc != 0) throw Error(groveRemoteError, "net transport: " + fabricError("fi_writedata", rc));
  return true;
}

bool Nic::send(const Control& c, fi_addr_t dst) {
  if (sizeof(Control) <= injectSize_) {
    const ssize_t rc = fi_inject(ep_, &c, sizeof(c), dst);
    if (rc == -FI_EAGAIN) return false;
    if (rc != 0) throw Error(groveRemoteError, "net transport: " + fabricError("fi_inject", rc));
    return true;
  }
  auto slot = std::find_if(sendSlots_.begin(), sendSlots_.end(),
                           [](const ControlSlot& s) { return !s.busy; });
  if (slot == sendSlots_.end()) return false;
  slot->msg = c;
  const ssize_t rc = fi_send(ep_, &slot->msg, sizeof(c), sendRegion_.desc, dst, &slot->fi);
  if (rc == -FI_EAGAIN) return false;
  if (rc != 0) throw Error(groveRemoteError, "net transport: " + fabricError("fi_send", rc));
  slot->busy = true;
  return true;
}

void Nic::postReceive(int slot) {
  ControlSlot& s = recvSlots_[slot];
  for (;;) {
    const ssize_t rc =
        fi_recv(ep_, &s.msg, sizeof(Control), recvRegion_.desc, FI_ADDR_UNSPEC, &s.fi);
    if (rc == 0) break;
    if (rc != -FI_EAGAIN)
      throw Error(groveSystemError, "net transport: " + fabricError("fi_recv", rc));
    fi_cq_read(cq_, nullptr, 0);  // progress, then try again
  }
  s.busy = true;
}

int Nic::progress(const std::function<void(const NicEvent&)>& on) {
  fi_cq_data_entry entries[32];
  int total = 0;
  for (;;) {
    const ssize_t n = fi_cq_read(cq_, entries, 32);
    if (n == -FI_EAGAIN) return total;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq_, &err, 0);
      // A write that failed is over too: its owner drops what it holds (a
      // put's source registration) before the failure is thrown.
      if ((err.flags & FI_WRITE) && err.op_context != nullptr) {
        NicEvent ev{};
        ev.kind = NicEvent::kWriteDone;
        ev.op = reinterpret_cast<WriteOp*>(err.op_context);
        ev.failed = true;
        on(ev);
      }
      const char* text = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
      throw Error(groveRemoteError, "net transport: an operation on " + name_ +
                                        " failed: " + fabricError("completion", err.err) + " (" +
                                        (text != nullptr ? text : "") +
                                        "); a peer is gone or "
                                        "a link is cut");
    }
    if (n < 0) throw Error(groveRemoteError, "net transport: " + fabricError("fi_cq_read", n));
    for (ssize_t i = 0; i < n; ++i) {
      const fi_cq_data_entry& e = entries[i];
      NicEvent ev{};
      if (e.flags & FI_REMOTE_CQ_DATA) {
        ev.kind = NicEvent::kSignal;
        ev.signal = static_cast<uint32_t>(e.data);
        on(ev);
      } else if (e.flags & FI_RECV) {
        auto* slot = static_cast<ControlSlot*>(e.op_context);
        ev.kind = NicEvent::kControl;
        ev.control = slot->msg;
        postReceive(static_cast<int>(slot - recvSlots_.data()));
        if (e.len == sizeof(Control)) on(ev);
      } else if (e.flags & FI_WRITE) {
        ev.kind = NicEvent::kWriteDone;
        ev.op = reinterpret_cast<WriteOp*>(e.op_context);
        on(ev);
      } else if (e.flags & FI_SEND) {
        auto* slot = static_cast<ControlSlot*>(e.op_context);
        if (slot != nullptr) slot->busy = false;
      }
    }
    total += static_cast<int>(n);
  }
}

}  // namespace grove::transport::net
