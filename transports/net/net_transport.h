// NetTransport: ranks on different hosts over a libfabric fabric (name
// "net"): verbs (InfiniBand, RoCE), efa, or any provider with reliable
// datagrams, one-sided writes and remote completion data; tcp where nothing
// faster is present and the transport is asked for by name.
//
// How it works: before the bootstrap each rank opens one endpoint per NIC
// (nic.h; an RDMA provider's domains, up to GROVE_NET_NICS; for the tcp
// provider the socket transport's interface, and every other interface when
// the topology's links carry addresses) and publishes the provider's name
// and every endpoint's fabric address as its blob. The sender of a
// directed link (peer, channel, route) picks the NIC at each end: those
// whose addresses are the ends of the link's route (a planned route from
// addRoute, else the topology's path to the peer, Context::routes), else
// NIC channel mod n at each end. The receiver owns a ring of bufferBytes in registered memory;
// the sender a staging ring of the same size. reserve() hands out staging
// space; commit() posts one-sided writes (Nic::write) of the committed
// bytes to the same offset of the peer's ring, each carrying a signal (the
// receiver's link id and the byte count) that lands in the receiver's
// completion queue once the bytes are there. peek() shows the bytes that
// have landed, in place (the receiver reduces straight out of the ring);
// consume() frees them and, every quarter ring or whenever the receiver
// has nothing left to read, sends the sender a credit (the bytes consumed
// so far) as a control message. Writes to one link complete in order (the
// providers' write-after-write ordering), so landed bytes are contiguous.
// Opening: for each send link the sender posts an offer with its link id
// and the two NICs; then every rank waits, answering each sender's offer for
// a link it opens with its ring's address and key (registered on the NIC
// the offer named), and taking the answers to its own offers (an offer that
// arrives before it is asked for waits in a stash). Nobody waits before
// posting what it can, so ranks that open at once never wait in a cycle.
// The same NICs give one-sided access (oneSided(), transport.h): regions
// exposed on NIC 0, puts signalled under link id 0. Every control message carries a SipHash MAC
// under the job's key, so only a holder of the job's secret can open a link
// or move credits. Errors: a failed write or completion (a peer gone, a link
// cut) throws groveRemoteError; a receiver whose sender died learns it from
// the job's abort notice or the wait timeout.
#pragma once

#include <memory>

#include "transports/registry.h"

namespace grove::transport {

/// True if both blobs are net endpoints of the same provider.
bool netCanConnect(const Address& a, const Address& b);
/// Opens this rank's NIC endpoints, or returns nullptr (logged) when no
/// usable provider is present -- or, unless args.named or
/// GROVE_NET_PROVIDER chooses it, when the only one is plain TCP, which the
/// socket transport serves as well. Throws when GROVE_NET_PROVIDER names a
/// provider that is not present.
std::unique_ptr<Endpoint> openNetEndpoint(const OpenArgs& args);
/// The transport over the endpoint openNetEndpoint made.
std::unique_ptr<Transport> makeNetTransport(const Context& ctx, std::unique_ptr<Endpoint> endpoint);

}  // namespace grove::transport
