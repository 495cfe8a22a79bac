// Socket link halves; see socket_link.h for how they work.
#include "transports/socket/socket_link.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>
#include <string>

#include "base/error.h"
#include "ir/wire.h"

namespace grove::transport {
namespace {

// The wire rule (ir/wire.h): steps start at aligned stream positions, and a
// ring's index must stay congruent to the stream position modulo kWireAlign
// so that no element straddles the wrap.
using plan::kWireAlign;

/// Staged bytes are pushed at commit() from this many on; fewer wait for the
/// next sendDirect (which sends them in the same system call as its data) or
/// flush() (after every executor pass). A wire-rule pad of a few bytes then
/// travels with the data instead of in a segment (and a wake-up) of its own.
constexpr uint64_t kPushAtBytes = 16 << 10;

/// Moves an empty ring's counters back to the start of the buffer while
/// keeping them congruent to the stream position modulo kWireAlign.
void rewindEmpty(uint64_t& head, uint64_t& tail) {
  if (head != tail) return;
  head = tail = head % kWireAlign;
}

/// Fills iov with the (up to two) pieces of ring range [from, from+len).
int ringIov(uint8_t* buf, size_t cap, uint64_t from, size_t len, iovec iov[2]) {
  size_t idx = static_cast<size_t>(from % cap);
  size_t first = cap - idx < len ? cap - idx : len;
  iov[0] = {buf + idx, first};
  if (first == len) return 1;
  iov[1] = {buf, len - first};
  return 2;
}

}  // namespace

// ------------------------------------------------------------------ send

SocketSendHalf::SocketSendHalf(net::Fd fd, size_t capacity, int peer, int channel)
    : fd_(std::move(fd)),
      buf_(new uint8_t[capacity]),
      cap_(capacity),
      peer_(peer),
      channel_(channel) {
  net::setNonBlocking(fd_.get());
}

size_t SocketSendHalf::reserve(void** ptr) {
  rewindEmpty(head_, tail_);  // empty: offer (nearly) the whole buffer
  size_t freeBytes = cap_ - static_cast<size_t>(head_ - tail_);
  if (freeBytes == 0) {
    push();
    freeBytes = cap_ - static_cast<size_t>(head_ - tail_);
    if (freeBytes == 0) return 0;
  }
  size_t idx = static_cast<size_t>(head_ % cap_);
  *ptr = buf_.get() + idx;
  return freeBytes < cap_ - idx ? freeBytes : cap_ - idx;
}

void SocketSendHalf::commit(size_t n) {
  head_ += n;
  if (head_ - tail_ >= kPushAtBytes) push();
}

bool SocketSendHalf::flush() {
  if (head_ != tail_) push();
  return head_ == tail_;
}

[[noreturn]] void SocketSendHalf::closedError(int err) const {
  throw Error(groveRemoteError, "socket connection to rank " + std::to_string(peer_) +
                                    " (channel " + std::to_string(channel_) + ") closed: " +
                                    std::strerror(err) + " (the peer exited or aborted)");
}

// Direct path: the kernel takes bytes straight from the caller's buffer.
// Staged bytes go first: many are pushed on their own, a few (a pad) in the
// same sendmsg as the data. The counters advance together so the ring stays
// congruent to the stream position modulo kWireAlign.
ptrdiff_t SocketSendHalf::sendDirect(const void* src, size_t n) {
  if (head_ - tail_ >= kPushAtBytes) push();
  const size_t staged = static_cast<size_t>(head_ - tail_);
  iovec iov[3];
  msghdr msg{};
  msg.msg_iov = iov;
  const int k = staged == 0 ? 0 : ringIov(buf_.get(), cap_, tail_, staged, iov);
  iov[k] = {const_cast<void*>(src), n};
  msg.msg_iovlen = static_cast<size_t>(k + 1);
  for (;;) {
    ssize_t s = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (s < 0 && errno == EINTR) continue;
    if (s < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return staged == 0 ? 0 : -1;
    if (s <= 0) closedError(s < 0 ? errno : EPIPE);
    if (static_cast<size_t>(s) <= staged) {  // only staged bytes went: they still go first
      tail_ += static_cast<uint64_t>(s);
      return head_ == tail_ ? 0 : -1;
    }
    const auto taken = static_cast<uint64_t>(static_cast<size_t>(s) - staged);
    head_ += taken;
    tail_ = head_;
    return static_cast<ptrdiff_t>(taken);
  }
}

void SocketSendHalf::push() {
  while (head_ != tail_) {
    iovec iov[2];
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = ringIov(buf_.get(), cap_, tail_, static_cast<size_t>(head_ - tail_), iov);
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      tail_ += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    closedError(n < 0 ? errno : EPIPE);
  }
}

// ------------------------------------------------------------------ recv

SocketRecvHalf::SocketRecvHalf(net::Fd fd, size_t capacity, int peer, int channel)
    : fd_(std::move(fd)),
      buf_(new uint8_t[capacity]),
      cap_(capacity),
      peer_(peer),
      channel_(channel) {
  net::setNonBlocking(fd_.get());
}

void SocketRecvHalf::pull() {
  rewindEmpty(head_, tail_);  // empty: receive from (nearly) the start
  size_t freeBytes = cap_ - static_cast<size_t>(head_ - tail_);
  if (freeBytes == 0 || eof_) return;
  iovec iov[2];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = ringIov(buf_.get(), cap_, head_, freeBytes, iov);
  for (;;) {
    ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_DONTWAIT);
    if (n > 0) {
      head_ += static_cast<uint64_t>(n);
      return;
    }
    if (n == 0) {
      eof_ = true;
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    eof_ = true;
    closeErr_ = errno;
    return;
  }
}

[[noreturn]] void SocketRecvHalf::closedError() const {
  throw Error(groveRemoteError,
              "socket connection from rank " + std::to_string(peer_) + " (channel " +
                  std::to_string(channel_) + ") closed " +
                  (closeErr_ != 0 ? std::string("(") + std::strerror(closeErr_) + ") " : "") +
                  "while data was still expected: the peer exited or aborted");
}

// Direct path: with nothing buffered, the kernel writes straight into the
// caller's buffer (at most n bytes, so the next step's bytes stay queued).
ptrdiff_t SocketRecvHalf::recvDirect(void* dst, size_t n) {
  if (head_ != tail_) return -1;  // buffered bytes are read first
  if (eof_) closedError();
  for (;;) {
    ssize_t k = ::recv(fd_.get(), dst, n, MSG_DONTWAIT);
    if (k > 0) {
      head_ += static_cast<uint64_t>(k);
      tail_ = head_;
      return k;
    }
    if (k == 0) {
      eof_ = true;
      closedError();
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    eof_ = true;
    closeErr_ = errno;
    closedError();
  }
}

size_t SocketRecvHalf::peek(const void** ptr) {
  pull();
  size_t avail = static_cast<size_t>(head_ - tail_);
  if (avail == 0) {
    if (!eof_) return 0;
    closedError();
  }
  size_t idx = static_cast<size_t>(tail_ % cap_);
  *ptr = buf_.get() + idx;
  return avail < cap_ - idx ? avail : cap_ - idx;
}

void SocketRecvHalf::consume(size_t n) { tail_ += n; }

}  // namespace grove::transport
