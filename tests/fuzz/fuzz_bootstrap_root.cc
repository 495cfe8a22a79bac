// libFuzzer target: the bootstrap root server (core/bootstrap_root.h), fed
// through a real socket as any process that can reach its port would feed
// it. The root's challenge is read first; then the first input byte picks
// what comes before the rest of the input:
//   0: nothing (a stranger: garbage, truncated or oversized headers, hellos
//      with a wrong mac)
//   1: a valid hello of rank 0 of a 1-rank job (then: gathers, aborts, byes)
//   2: a valid hello of rank 0 of a 2-rank job (a job left incomplete)
// The root must never crash or trip a sanitizer, whatever it is sent; a
// root whose job the input ended is replaced for the next input.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/socket.h"
#include "core/bootstrap_root.h"

namespace {

using grove::core::HelloMsg;
using grove::core::MsgHeader;
using grove::core::MsgType;
using grove::core::RootServer;

constexpr uint64_t kSecret = 0x5ec7e75ec7e75ec7ull;
uint64_t nonce = 1;

std::shared_ptr<RootServer> root;

std::vector<uint8_t> hello(int rank, int nranks, uint64_t challenge) {
  MsgHeader h;
  h.type = static_cast<uint32_t>(MsgType::kHello);
  h.length = sizeof(HelloMsg);
  HelloMsg m;
  m.magic = grove::core::kHelloMagic;
  m.version = grove::core::kProtocolVersion;
  m.rank = rank;
  m.nranks = nranks;
  m.nonce = nonce;
  m.self.rank = rank;
  m.self.pid = 1;
  m.self.hostHash = 1;
  m.mac = grove::core::helloMac(m, challenge, kSecret);
  std::vector<uint8_t> out(sizeof(h) + sizeof(m));
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), &m, sizeof(m));
  return out;
}

// A root for a new job (a new nonce) on 127.0.0.1.
void startRoot() {
  sockaddr_storage addr{};
  auto* in = reinterpret_cast<sockaddr_in*>(&addr);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ++nonce;
  root = RootServer::start(addr, kSecret, nonce, /*closeListenerWhenComplete=*/false);
}

// On a new connection: reads the root's challenge, sends a hello answering
// it (helloRanks > 0: of rank 0 of that many) and `rest`, reads whatever
// comes back for a moment, closes.
void exchange(int helloRanks, const uint8_t* rest, size_t restBytes, int waitMs) {
  grove::net::Fd fd = grove::net::connectUntil(root->address(), grove::net::Deadline::in(5));
  MsgHeader challenge;
  if (grove::net::recvAll(fd.get(), &challenge, sizeof(challenge), grove::net::Deadline::in(5)) !=
      grove::net::IoResult::kOk)
    return;
  std::vector<uint8_t> bytes;
  if (helloRanks > 0) bytes = hello(0, helloRanks, challenge.seq);
  bytes.insert(bytes.end(), rest, rest + restBytes);
  if (!bytes.empty() &&
      grove::net::sendAll(fd.get(), bytes.data(), bytes.size(), grove::net::Deadline::in(5)) !=
          grove::net::IoResult::kOk)
    return;
  pollfd p{fd.get(), POLLIN, 0};
  while (::poll(&p, 1, waitMs) > 0) {
    uint8_t buf[4096];
    ssize_t n = ::recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (!root || root->waitFinished(0)) startRoot();
  try {
    exchange(data[0] == 1 || data[0] == 2 ? data[0] : 0, data + 1, size - 1, 2);
  } catch (const grove::Error&) {  // the root refused or closed: fine
  }
  return 0;
}
