// The bootstrap root server; see bootstrap_root.h for how it works. The
// thread itself is RootLoop (root_loop.h).
#include "core/bootstrap_root.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/log.h"
#include "base/siphash.h"
#include "core/root_loop.h"

namespace grove::core {

std::mutex& rootRegistryMutex() {
  static std::mutex m;
  return m;
}
std::map<uint64_t, std::weak_ptr<RootServer>>& rootRegistry() {
  static auto* r = new std::map<uint64_t, std::weak_ptr<RootServer>>();  // never destroyed: the
  return *r;  // detached thread may still run while static destructors do
}
std::deque<uint64_t>& endedRoots() {
  static auto* d = new std::deque<uint64_t>();
  return *d;
}

Buffer makeMessage(MsgType type, uint64_t seq, const void* payload, size_t bytes) {
  auto buf = std::make_shared<std::vector<uint8_t>>(sizeof(MsgHeader) + bytes);
  MsgHeader h{static_cast<uint32_t>(type), static_cast<uint32_t>(bytes), seq};
  std::memcpy(buf->data(), &h, sizeof(h));
  if (bytes > 0) std::memcpy(buf->data() + sizeof(h), payload, bytes);
  return buf;
}

uint64_t helloMac(const HelloMsg& m, uint64_t challenge, uint64_t secret) {
  struct Signed {
    HelloMsg hello;
    uint64_t challenge;
  } s{};
  s.hello = m;
  s.hello.mac = 0;
  s.challenge = challenge;
  return sipHash24(SipKey{secret, m.nonce}, &s, sizeof(s));
}

std::string describeRank(int rank, const transport::PeerInfo& info) {
  return "rank " + std::to_string(rank) + " (host " + std::string(info.hostName) + " pid " +
         std::to_string(info.pid) + ")";
}

// ------------------------------------------------------------------ RootServer

std::shared_ptr<RootServer> RootServer::start(const sockaddr_storage& addr, uint64_t secret,
                                              uint64_t nonce, bool closeListenerWhenComplete) {
  sockaddr_storage bound = addr;
  net::Fd listener = net::listenOn(bound);
  return startOn(std::move(listener), bound, secret, nonce, closeListenerWhenComplete);
}

std::shared_ptr<RootServer> RootServer::startOn(net::Fd listener, const sockaddr_storage& addr,
                                                uint64_t secret, uint64_t nonce,
                                                bool closeListenerWhenComplete) {
  auto server = std::make_shared<RootServer>();
  server->addr_ = addr;
  server->nonce_ = nonce;
  server->closesWhenComplete_ = closeListenerWhenComplete;  // no thread reads it yet
  net::setNonBlocking(listener.get());
  {
    std::lock_guard<std::mutex> lock(rootRegistryMutex());
    rootRegistry()[nonce] = server;
  }
  auto loop = std::make_unique<RootLoop>(server, std::move(listener), secret, nonce,
                                         closeListenerWhenComplete);
  std::thread([l = std::move(loop)]() mutable {
    l->run();
    l.reset();
  }).detach();
  GROVE_INFO(log::kBoot, "bootstrap root listening on %s",
             net::formatAddress(server->addr_).c_str());
  return server;
}

bool RootServer::ending() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_ || allLeft_;
}

bool RootServer::complete() {
  std::lock_guard<std::mutex> lock(mu_);
  return complete_ && closesWhenComplete_;
}

bool RootServer::endedLocally(uint64_t nonce) {
  std::lock_guard<std::mutex> lock(rootRegistryMutex());
  if (rootRegistry().count(nonce) != 0) return false;
  const auto& ended = endedRoots();
  return std::find(ended.begin(), ended.end(), nonce) != ended.end();
}

std::shared_ptr<RootServer> RootServer::findLocal(uint64_t nonce) {
  std::lock_guard<std::mutex> lock(rootRegistryMutex());
  auto it = rootRegistry().find(nonce);
  return it == rootRegistry().end() ? nullptr : it->second.lock();
}

bool RootServer::waitRemoteRanksGone(double timeoutSec) {
  std::unique_lock<std::mutex> lock(mu_);
  auto allGone = [&] {
    if (finished_) return true;
    if (rankGone_.empty()) return false;
    for (int g : rankGone_)
      if (!g) return false;
    return true;
  };
  return cv_.wait_for(lock, std::chrono::duration<double>(timeoutSec), allGone);
}

bool RootServer::waitFinished(double timeoutSec) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(timeoutSec), [&] { return finished_; });
}

}  // namespace grove::core
