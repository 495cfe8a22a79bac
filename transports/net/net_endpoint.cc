// The network transport's endpoints and blob; see net_endpoint.h and
// net_transport.h.
#include "transports/net/net_endpoint.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "base/socket.h"
#include "transports/net/fabric_lib.h"
#include "transports/net/net_transport.h"

namespace grove::transport {
namespace {

// The net transport's settings (grove-info lists them with the library's).
const config::VarTable kNetSettings{
    {"GROVE_NET_PROVIDER", config::Type::kString, "",
     "libfabric provider of the net transport (verbs, efa, tcp, ...); empty: FI_PROVIDER, else "
     "the fastest present where an RDMA device exists (tcp only when GROVE_TRANSPORT names net)"},
    {"GROVE_NET_NICS", config::Type::kInt, "0",
     "NICs (fabric domains) the net transport spreads its channels over; 0 = every domain of "
     "the chosen provider on the chosen interface's fabric, up to 4",
     nullptr, 0, 4},
};

using net::Nic;

constexpr uint32_t kBlobMagic = 0x4e455447;  // "GTEN"
constexpr size_t kProviderChars = 32;
constexpr int kMaxNics = 12;  // published (RDMA: GROVE_NET_NICS, at most 4)
constexpr int kMaxRdmaNics = 4;

// The published blob: header, then per NIC its address length and bytes.
struct BlobHeader {
  uint32_t magic = kBlobMagic;
  uint8_t nics = 0;
  uint8_t pad[3] = {};
  char provider[kProviderChars] = {};
};

bool rdmaProvider(const std::string& prov) {
  // Providers that move bytes in software over sockets, or only on one host.
  for (const char* slow : {"tcp", "sockets", "udp", "shm", "net"})
    if (prov == slow || prov.rfind(std::string(slow) + ";", 0) == 0) return false;
  return true;
}

// One fi_getinfo entry per domain of `provider` (the first of each), in order.
std::vector<const fi_info*> domainsOf(const fi_info* list, const std::string& provider) {
  std::vector<const fi_info*> out;
  std::set<std::string> seen;
  for (const fi_info* i = list; i != nullptr; i = i->next) {
    if (provider != i->fabric_attr->prov_name) continue;
    const std::string dom = i->domain_attr->name != nullptr ? i->domain_attr->name : "";
    if (i->addr_format != FI_SOCKADDR_IN && i->addr_format != FI_SOCKADDR_IN6 &&
        i->addr_format != FI_SOCKADDR && rdmaProvider(provider) == false)
      continue;
    if (!seen.insert(dom).second) continue;
    out.push_back(i);
  }
  return out;
}

// True if the kernel shows an RDMA device (InfiniBand, RoCE, iWARP, EFA,
// Omni-Path: /sys/class/infiniband; Slingshot: /sys/class/cxi).
bool rdmaDevicePresent() {
  for (const char* dir : {"/sys/class/infiniband", "/sys/class/cxi"}) {
    DIR* d = opendir(dir);
    if (d == nullptr) continue;
    bool any = false;
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') any = true;
    closedir(d);
    if (any) return true;
  }
  return false;
}

}  // namespace

bool parseBlob(const Address& a, PeerBlob* out) {
  if (a.size < sizeof(BlobHeader) || a.size > Address::kMaxBytes) return false;
  BlobHeader h;
  std::memcpy(&h, a.bytes, sizeof(h));
  if (h.magic != kBlobMagic || h.nics == 0 || h.nics > kMaxNics) return false;
  out->provider.assign(h.provider, strnlen(h.provider, kProviderChars));
  size_t at = sizeof(h);
  for (int i = 0; i < h.nics; ++i) {
    if (at >= a.size) return false;
    const size_t len = a.bytes[at++];
    if (len == 0 || at + len > a.size) return false;
    out->nics.emplace_back(a.bytes + at, a.bytes + at + len);
    at += len;
  }
  return true;
}

Address NetEndpoint::address() const {
  Address a;
  BlobHeader h;
  std::snprintf(h.provider, sizeof(h.provider), "%s", provider.c_str());
  size_t at = sizeof(h);
  for (const auto& n : nics) {
    const auto& bytes = n->address();
    if (bytes.size() > 255 || at + 1 + bytes.size() > Address::kMaxBytes) break;
    a.bytes[at++] = static_cast<uint8_t>(bytes.size());
    std::memcpy(a.bytes + at, bytes.data(), bytes.size());
    at += bytes.size();
    ++h.nics;
  }
  std::memcpy(a.bytes, &h, sizeof(h));
  a.size = static_cast<uint32_t>(at);
  return a;
}

std::string hostOf(const std::vector<uint8_t>& addr) {
  if (addr.size() < sizeof(sa_family_t) || addr.size() > sizeof(sockaddr_storage)) return "";
  sockaddr_storage ss{};
  std::memcpy(&ss, addr.data(), addr.size());
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return "";
  return ::grove::net::formatHost(ss);
}

bool netCanConnect(const Address& a, const Address& b) {
  PeerBlob x, y;
  return parseBlob(a, &x) && parseBlob(b, &y) && x.provider == y.provider;
}

std::unique_ptr<Endpoint> openNetEndpoint(const OpenArgs& args) {
  // The provider: GROVE_NET_PROVIDER, else libfabric's own FI_PROVIDER.
  std::string chosen = config::getString("GROVE_NET_PROVIDER");
  const char* fiProvider = std::getenv("FI_PROVIDER");
  if (chosen.empty() && fiProvider != nullptr) chosen = fiProvider;
  // By default, only where an RDMA device exists: asking libfabric costs
  // every provider's probe (about 0.3 s), and without one the socket
  // transport serves TCP better anyway.
  if (!args.named && chosen.empty() && !rdmaDevicePresent()) {
    GROVE_INFO(log::kNet,
               "net transport not used: no RDMA device (/sys/class/infiniband, "
               "/sys/class/cxi); GROVE_TRANSPORT=net uses libfabric's tcp provider");
    return nullptr;
  }
  std::string why;
  const net::FabricLib* lib = net::fabricLib(&why);
  if (lib == nullptr) {
    if (!chosen.empty()) throwInvalidUsage("GROVE_NET_PROVIDER=" + chosen + ", but " + why);
    GROVE_INFO(log::kNet, "net transport unavailable: %s", why.c_str());
    return nullptr;
  }
  fi_info* hints = lib->dupinfo(nullptr);
  if (hints == nullptr) throw Error(groveSystemError, "net transport: fi_allocinfo failed");
  hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  if (!chosen.empty()) hints->fabric_attr->prov_name = strdup(chosen.c_str());
  fi_info* list = nullptr;
  const int rc = lib->getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &list);
  lib->freeinfo(hints);
  if (rc != 0 || list == nullptr) {
    if (!chosen.empty())
      throwInvalidUsage("GROVE_NET_PROVIDER=" + chosen +
                        ": no such libfabric provider with "
                        "reliable datagrams and one-sided writes here (" +
                        net::fabricError("fi_getinfo", rc) + ")");
    GROVE_INFO(log::kNet,
               "net transport unavailable: no libfabric provider with reliable "
               "datagrams and one-sided writes");
    return nullptr;
  }
  struct Free {
    const net::FabricLib* lib;
    fi_info* list;
    ~Free() { lib->freeinfo(list); }
  } freeList{lib, list};
  // The fastest provider present: the first RDMA one in libfabric's order, else tcp.
  std::string provider;
  for (const fi_info* i = list; i != nullptr && provider.empty(); i = i->next)
    if (rdmaProvider(i->fabric_attr->prov_name)) provider = i->fabric_attr->prov_name;
  if (provider.empty())
    for (const fi_info* i = list; i != nullptr && provider.empty(); i = i->next)
      if (std::string(i->fabric_attr->prov_name).find("tcp") != std::string::npos)
        provider = i->fabric_attr->prov_name;
  if (provider.empty()) provider = list->fabric_attr->prov_name;
  if (!rdmaProvider(provider) && !args.named && chosen.empty()) {
    GROVE_INFO(log::kNet,
               "net transport: only %s here; the socket transport serves TCP "
               "(GROVE_TRANSPORT=net uses it anyway)",
               provider.c_str());
    return nullptr;
  }
  std::vector<const fi_info*> domains = domainsOf(list, provider);
  if (!rdmaProvider(provider)) {
    // Software providers: a domain is an interface. The one the socket
    // transport picks comes first; the others only when the topology's
    // links carry addresses (each link end its own interface), so links
    // can follow the planner's routes as the socket transport's do.
    const std::string iface = ::grove::net::pickInterface().name;
    auto named = [](const fi_info* d) {
      return std::string(d->domain_attr->name ? d->domain_attr->name : "");
    };
    std::stable_partition(domains.begin(), domains.end(),
                          [&](const fi_info* d) { return named(d) == iface; });
    if (!args.linkAddresses) domains.resize(std::min<size_t>(domains.size(), 1));
    domains.erase(std::remove_if(domains.begin() + std::min<size_t>(domains.size(), 1),
                                 domains.end(), [&](const fi_info* d) { return named(d) == "lo"; }),
                  domains.end());
    if (domains.size() > static_cast<size_t>(kMaxNics)) domains.resize(kMaxNics);
  } else {
    // The topology's closest NIC first: channel 0 leaves through it.
    std::stable_partition(domains.begin(), domains.end(), [&](const fi_info* d) {
      const std::string name = d->domain_attr->name ? d->domain_attr->name : "";
      for (const std::string& c : args.closestNics)
        if (name == c || name.rfind(c + "-", 0) == 0) return true;
      return false;
    });
    int want = static_cast<int>(config::getInt("GROVE_NET_NICS"));
    if (want <= 0) want = kMaxRdmaNics;
    if (static_cast<int>(domains.size()) > want) domains.resize(want);
  }
  auto ep = std::make_unique<NetEndpoint>();
  ep->provider = provider.substr(0, kProviderChars - 1);
  for (const fi_info* d : domains) {
    try {
      ep->nics.push_back(std::make_unique<Nic>(*lib, d));
    } catch (const Error& e) {
      // Asked for by name: say why. By default: this host just has no net transport.
      if (args.named || !chosen.empty()) throw;
      GROVE_INFO(log::kNet, "net transport unavailable: %s", e.what());
      return nullptr;
    }
  }
  if (ep->nics.empty()) return nullptr;
  std::string names;
  for (const auto& n : ep->nics) names += (names.empty() ? "" : ", ") + n->name();
  GROVE_INFO(log::kNet, "net transport: %zu NIC(s): %s", ep->nics.size(), names.c_str());
  return ep;
}

}  // namespace grove::transport
