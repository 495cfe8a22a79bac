// The transport registry's table (see registry.h). One row per transport.
#include "transports/registry.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "base/error.h"
#include "grove_build_info.h"
#include "transports/host_staged/host_staged_transport.h"
#include "transports/loopback/loopback_transport.h"
#include "transports/proxy/device_proxy.h"
#include "transports/shm/shm_transport.h"
#include "transports/socket/socket_transport.h"
#if GROVE_HAVE_LIBFABRIC
#include "transports/net/net_transport.h"
#endif
#if GROVE_HAVE_CUDA
#include "transports/cuda_p2p/cuda_p2p_transport.h"
#endif

namespace grove::transport {
namespace {

/// A transport that needs nothing published before the bootstrap.
class NoEndpoint final : public Endpoint {
 public:
  Address address() const override { return Address{}; }
};

std::unique_ptr<Endpoint> noEndpoint(const OpenArgs&) { return std::make_unique<NoEndpoint>(); }

/// The socket transport's listener, published as its sockaddr.
class SocketEndpoint final : public Endpoint {
 public:
  explicit SocketEndpoint(std::unique_ptr<SocketListener> l) : listener(std::move(l)) {}
  Address address() const override { return packSocketAddress(listener->address()); }
  std::unique_ptr<SocketListener> listener;
};

bool sameHost(const PeerEnd& a, const PeerEnd& b) { return a.info.hostHash == b.info.hostHash; }

/// The traits of device rings: GPU kernels move the bytes, no host step.
constexpr LinkTraits kDeviceRingTraits{.sharedMemory = false, .deviceRings = true};

std::vector<TransportEntry> builtIn() {
  std::vector<TransportEntry> rows;
  // --- byte links ---
  rows.push_back(TransportEntry{
      .name = "shm",
      .description = "POSIX shared memory between ranks of one host",
      .priority = 300,
      .traits = {.latencyUs = 1, .stepOverheadUs = 2, .sharedMemory = true, .slotLinks = true},
      .provides = kByteStreams | kSlots,
      .canConnect = sameHost,
      .open = noEndpoint,
      .make = [](const Context& ctx, std::unique_ptr<Endpoint>) -> std::unique_ptr<Transport> {
        return std::make_unique<ShmTransport>(ctx);
      }});
#if GROVE_HAVE_LIBFABRIC
  rows.push_back(TransportEntry{
      .name = "net",
      .description =
          "libfabric reliable-datagram endpoints, one-sided writes (verbs, efa, tcp, ...)",
      .priority = 200,
      .traits = {.latencyUs = 10, .stepOverheadUs = 10, .sharedMemory = false},
      .provides = kByteStreams | kOneSided,
      .canConnect = [](const PeerEnd& a,
                       const PeerEnd& b) { return netCanConnect(a.address, b.address); },
      .open = [](const OpenArgs& args) { return openNetEndpoint(args); },
      .make = [](const Context& ctx,
                 std::unique_ptr<Endpoint> e) { return makeNetTransport(ctx, std::move(e)); }});
#endif
  rows.push_back(TransportEntry{
      .name = "socket",
      .description = "TCP, one connection per directed link",
      .priority = 100,
      .traits = {.latencyUs = 25, .stepOverheadUs = 20, .sharedMemory = false},
      .provides = kByteStreams,
      .canConnect =
          [](const PeerEnd&, const PeerEnd& b) {
            return net::addressUsable(unpackSocketAddress(b.address));
          },
      .open = [](const OpenArgs& args) -> std::unique_ptr<Endpoint> {
        return std::make_unique<SocketEndpoint>(
            SocketTransport::listen(args.timeoutSec, args.linkAddresses));
      },
      .make = [](const Context& ctx, std::unique_ptr<Endpoint> e) -> std::unique_ptr<Transport> {
        auto* s = dynamic_cast<SocketEndpoint*>(e.get());
        if (s == nullptr) throwInternalError("socket transport made without its listener");
        return std::make_unique<SocketTransport>(ctx, std::move(s->listener));
      }});
  // Threads of one process only; never chosen unless GROVE_TRANSPORT names it.
  rows.push_back(TransportEntry{
      .name = "loopback",
      .description = "heap rings between threads of one process (tests)",
      .priority = 0,
      .traits = {.latencyUs = 1, .stepOverheadUs = 2, .sharedMemory = true},
      .provides = kByteStreams,
      .canConnect = [](const PeerEnd& a,
                       const PeerEnd& b) { return sameHost(a, b) && a.info.pid == b.info.pid; },
      .open = noEndpoint,
      .make = [](const Context& ctx, std::unique_ptr<Endpoint>) -> std::unique_ptr<Transport> {
        return std::make_unique<LoopbackTransport>(ctx);
      }});
  // --- device rings ---
#if GROVE_HAVE_CUDA
  rows.push_back(TransportEntry{
      .name = "cuda_p2p",
      .description = "device rings in the receiver's GPU memory, mapped by CUDA IPC",
      .priority = 300,
      .traits = kDeviceRingTraits,
      .provides = kDeviceRings,
      .makeDevice = [](const DeviceContext& ctx,
                       const DeviceOpenArgs& args) -> std::unique_ptr<DeviceTransport> {
        if (args.emulate || args.disableP2P) return nullptr;
        return std::make_unique<CudaP2PTransport>(ctx);
      }});
#endif
  rows.push_back(TransportEntry{
      .name = "host_staged",
      .description = "device rings in pinned shared host memory between GPUs of one host",
      .priority = 200,
      .traits = kDeviceRingTraits,
      .provides = kDeviceRings,
      .makeDevice = [](const DeviceContext& ctx,
                       const DeviceOpenArgs& args) -> std::unique_ptr<DeviceTransport> {
        return std::make_unique<HostStagedTransport>(ctx, args.emulate);
      }});
  rows.push_back(TransportEntry{
      .name = "proxy",
      .description = "device rings to other hosts, pumped over the byte links by a host thread",
      .priority = 100,
      .traits = kDeviceRingTraits,
      .provides = kDeviceRings,
      .makeDevice = [](const DeviceContext& ctx,
                       const DeviceOpenArgs& args) -> std::unique_ptr<DeviceTransport> {
        return std::make_unique<ProxyTransport>(ctx, args.emulate, args.wait);
      }});
  return rows;
}

struct Table {
  std::mutex mu;  // guards registration and the seal; reads come after the seal
  std::vector<TransportEntry> rows = builtIn();
  std::atomic<bool> sealed{false};
};

Table& table() {
  static Table t;
  return t;
}

bool isByteRow(const TransportEntry& e) { return e.has(kByteStreams); }

const TransportEntry* findIn(const std::vector<TransportEntry>& rows, const std::string& name) {
  for (const TransportEntry& e : rows)
    if (strcasecmp(e.name, name.c_str()) == 0) return &e;
  return nullptr;
}

size_t byteRows(const std::vector<TransportEntry>& rows) {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), isByteRow));
}

}  // namespace

std::string describeProvides(unsigned provides) {
  static const std::pair<unsigned, const char*> kWords[] = {{kByteStreams, "byte streams"},
                                                            {kSlots, "slots"},
                                                            {kOneSided, "one-sided writes"},
                                                            {kDeviceRings, "device rings"}};
  std::string out;
  for (const auto& [bit, word] : kWords)
    if ((provides & bit) != 0) out += (out.empty() ? "" : ", ") + std::string(word);
  return out.empty() ? "nothing" : out;
}

const std::vector<TransportEntry>& registry() {
  sealRegistry();  // what is read stays as it was read
  return table().rows;
}

void registerTransport(TransportEntry row) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.sealed.load())
    throwInvalidUsage(std::string("transport '") + (row.name ? row.name : "") +
                      "' registered after the first communicator read the registry");
  if (row.name == nullptr || row.name[0] == '\0')
    throwInvalidArgument("a transport row needs a name");
  if (findIn(t.rows, row.name) != nullptr)
    throwInvalidArgument(std::string("transport '") + row.name + "' is already registered");
  const bool bytes = isByteRow(row);
  if (bytes && (!row.canConnect || !row.open || !row.make))
    throwInvalidArgument(std::string("transport '") + row.name +
                         "' provides byte streams but lacks canConnect, open or make");
  if (row.has(kDeviceRings) && !row.makeDevice)
    throwInvalidArgument(std::string("transport '") + row.name +
                         "' provides device rings but has no makeDevice");
  if (!bytes && !row.has(kDeviceRings))
    throwInvalidArgument(std::string("transport '") + row.name +
                         "' provides neither byte streams nor device rings");
  if (bytes && byteRows(t.rows) >= static_cast<size_t>(kMaxTransports))
    throwInvalidArgument(std::string("transport '") + row.name + "': all " +
                         std::to_string(kMaxTransports) + " address slots of PeerInfo are taken");
  // After the last row of its kind whose priority is at least its own.
  auto at = t.rows.begin();
  for (auto it = t.rows.begin(); it != t.rows.end(); ++it)
    if (isByteRow(*it) == bytes && it->priority >= row.priority) at = it + 1;
  if (at == t.rows.begin() && !bytes) at = t.rows.begin() + static_cast<long>(byteRows(t.rows));
  t.rows.insert(at, std::move(row));
}

void sealRegistry() {
  Table& t = table();
  if (t.sealed.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(t.mu);
  if (byteRows(t.rows) > static_cast<size_t>(kMaxTransports))
    throwInternalError("more byte transports registered than PeerInfo carries addresses for");
  for (size_t i = 0; i < t.rows.size(); ++i)
    if (!isByteRow(t.rows[i]) && i < byteRows(t.rows))
      throwInternalError("the registry lists a device row before a byte row");
  t.sealed.store(true, std::memory_order_release);
}

const TransportEntry* findTransport(const std::string& name) { return findIn(registry(), name); }

const TransportEntry* firstProviding(unsigned what) {
  const TransportEntry* best = nullptr;
  for (const TransportEntry& e : registry())
    if (e.has(what) && (best == nullptr || e.priority > best->priority)) best = &e;
  return best;
}

std::string transportNames(unsigned what) {
  std::string names;
  for (const TransportEntry& e : registry())
    if (e.has(what)) names += (names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

bool describeLocalDevice(DevicePeer& peer, int cudaDevice) {
#if GROVE_HAVE_CUDA
  return fillCudaIdentity(peer, cudaDevice);
#else
  (void)peer, (void)cudaDevice;
  return false;
#endif
}

Context contextForSlot(const Context& ctx, int slot) {
  if (slot < 0 || slot >= kMaxTransports) throwInternalError("transport slot out of range");
  Context c = ctx;
  c.addresses.assign(ctx.peers.size(), Address{});
  for (size_t r = 0; r < ctx.peers.size(); ++r) c.addresses[r] = ctx.peers[r].addresses[slot];
  return c;
}

}  // namespace grove::transport
