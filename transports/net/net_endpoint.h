// The network transport's endpoints and their published blob: what a rank
// opens before the bootstrap (a Nic per chosen fabric domain) and how peers
// read it. Private to transports/net.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/net/nic.h"
#include "transports/registry.h"

namespace grove::transport {

/// A peer's blob, read back: its provider and every NIC's fabric address.
struct PeerBlob {
  std::string provider;
  std::vector<std::vector<uint8_t>> nics;
};

/// Reads a published blob; false if it is not a net endpoint's.
bool parseBlob(const Address& a, PeerBlob* out);

/// The IP host of a sockaddr-format fabric address ("" for other formats).
std::string hostOf(const std::vector<uint8_t>& addr);

/// What openNetEndpoint opens: one Nic per chosen domain, and the provider.
class NetEndpoint final : public Endpoint {
 public:
  std::vector<std::unique_ptr<net::Nic>> nics;
  std::string provider;
  /// The blob: a header with the provider's name, then per NIC its address.
  Address address() const override;
};

}  // namespace grove::transport
