// Nic: one libfabric endpoint on one fabric domain (a NIC), and the
// one-sided primitives the network transport is built on.
//
// How it works: a reliable-datagram endpoint (FI_EP_RDM) with one
// completion queue and an address vector of every peer's endpoints on its
// NICs. Three kinds of traffic cross it:
//   - writes: fi_writedata from registered local memory into a peer's
//     registered memory, with a 32-bit immediate the peer's completion queue
//     reports when the bytes have landed (the signal); the local completion
//     says the source may be reused;
//   - control messages: small fixed-size messages (Control), each in a
//     receive buffer posted ahead, for link set-up and flow-control credits;
//   - nothing else: no two-sided data path.
// Memory is registered through a cache keyed by address range, so a buffer
// registered once is not registered again. Each use holds a reference on
// the registration it got (a window for its life, a put until its write
// completes): a registration closes only when nothing uses it any more, so
// overlapping uses never close or replace what another still writes with
// (a larger range at the same address is a registration of its own). Progress is manual: whoever
// waits calls progress(), which reads the completion queue and hands every
// event to the caller's handler. Not thread-safe: the transport serialises.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transports/net/fabric_lib.h"

namespace grove::transport::net {

/// A registered region: what a local operation passes as its descriptor and
/// what a peer needs to write into it.
struct Region {
  void* base = nullptr;
  size_t bytes = 0;
  void* desc = nullptr;     ///< fi_mr_desc (null where the provider needs none)
  uint64_t key = 0;         ///< fi_mr_key
  uint64_t remoteBase = 0;  ///< what a peer adds offsets to: the address, or 0 (offset addressing)
};

/// A control message (set-up offers, credits); fixed size.
struct Control {
  uint32_t magic = 0;
  uint32_t kind = 0;
  int32_t src = -1;  ///< sending rank
  int32_t channel = 0;
  uint32_t route = 0;
  uint32_t link = 0;       ///< the id the receiver of this message uses for the link
  uint32_t replyLink = 0;  ///< the sender's own id for the link
  uint32_t reserved = 0;
  uint64_t addr = 0;
  uint64_t key = 0;
  uint64_t value = 0;
  uint64_t mac = 0;
};

/// Context of a posted write: providers with FI_CONTEXT use its first bytes.
class Nic;
struct WriteOp {
  fi_context2 fi{};
  void* owner = nullptr;  ///< who to tell on completion
  size_t bytes = 0;
  /// A one-sided put's source registration, unreferenced on completion
  /// (null: none held).
  Nic* sourceNic = nullptr;
  uint64_t sourceKey = 0;
};

/// What progress() reports.
struct NicEvent {
  enum Kind { kWriteDone, kSignal, kControl } kind;
  WriteOp* op = nullptr;  ///< kWriteDone
  uint32_t signal = 0;    ///< kSignal: the immediate
  Control control;        ///< kControl
  bool failed = false;    ///< kWriteDone: the write completed in error (progress throws next)
};

class Nic {
 public:
  /// Opens fabric, domain, completion queue, address vector and endpoint
  /// for `info` (one entry of fi_getinfo; copied). Throws groveSystemError.
  Nic(const FabricLib& lib, const fi_info* info);
  ~Nic();
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  /// Provider and domain, e.g. "tcp;ofi_rxm/eth0".
  const std::string& name() const { return name_; }
  const std::string& provider() const { return provider_; }
  /// This endpoint's fabric address (fi_getname).
  const std::vector<uint8_t>& address() const { return address_; }
  /// Adds a peer endpoint's address; returns its handle.
  fi_addr_t insert(const uint8_t* addr, size_t len);

  /// Registers [base, base + bytes) for local writes from it and remote
  /// writes into it, and takes a reference on that registration (unref);
  /// cached: a range inside a cached registration costs nothing.
  Region registerMemory(void* base, size_t bytes);
  /// Drops a reference registerMemory took, named by its region's key; a
  /// registration no longer cached (drop) closes with its last reference.
  void unref(uint64_t key);
  /// Takes the registrations starting at `base` out of the cache (the memory
  /// is about to go): each closes now, or with its last reference.
  void drop(void* base);
  /// Registrations made and cache hits (tests).
  size_t registrations() const { return made_; }
  size_t registrationHits() const { return hits_; }

  /// Posts a write of [src, src + n) (inside `local`) to `dst`'s region
  /// `remote` at offset `offset`, signalling `signal`. Returns false when
  /// the provider is busy (try again after progress()); throws on errors.
  bool write(const void* src, size_t n, const Region& local, fi_addr_t dst, const Region& remote,
             uint64_t offset, uint32_t signal, WriteOp* op);
  /// Posts a control message to `dst`. Returns false when busy.
  bool send(const Control& c, fi_addr_t dst);
  /// Reads completions, calling `on` for each; returns how many. Throws
  /// groveRemoteError when an operation failed (a peer gone, a cut link).
  int progress(const std::function<void(const NicEvent&)>& on);

  /// Largest write the immediate can describe: the signal carries the byte
  /// count in its low bits.
  size_t maxWrite() const { return maxWrite_; }
  /// Control receives kept posted (and control sends in flight at most).
  static constexpr int kControlSlots = 64;

 private:
  void postReceive(int slot);
  void release();
  const FabricLib& lib_;
  std::string name_, provider_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<uint8_t> address_;
  bool virtAddr_ = false, provKey_ = false, localMr_ = false;
  uint64_t nextKey_ = 1;
  size_t maxWrite_ = 0;
  size_t injectSize_ = 0;
  struct Reg {
    fid_mr* mr = nullptr;
    Region region;
    int refs = 0;        ///< uses that hold it (registerMemory, unref)
    bool cached = true;  ///< serves new uses; once not, closes with its last reference
  };
  void closeIfUnused(std::multimap<uintptr_t, Reg>::iterator it);
  std::multimap<uintptr_t, Reg> regs_;  // by start address
  size_t hits_ = 0;
  size_t made_ = 0;
  // Posted control receives and sends (their contexts and buffers).
  struct ControlSlot {
    fi_context2 fi{};
    Control msg;
    bool send = false;
    bool busy = false;
  };
  std::vector<ControlSlot> recvSlots_, sendSlots_;
  Region recvRegion_, sendRegion_;
};

}  // namespace grove::transport::net
