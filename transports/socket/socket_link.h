// The two halves of one socket link (internal to the socket transport).
//
// How it works: each half owns a non-blocking TCP socket and a byte buffer of
// Context::bufferBytes used as a ring (head = bytes ever produced, tail =
// bytes ever consumed; when the ring is empty both are reset to 0 so the next
// reservation is the whole buffer). The sending half stages what the executor
// commits and pushes it with sendmsg(MSG_DONTWAIT) at once and on flush();
// the receiving half pulls with recvmsg(MSG_DONTWAIT) into its free space on
// every peek() and shows the contiguous bytes it holds. Two iovecs cover the
// wrap-around, so one system call moves everything that fits. A reset or
// closed connection becomes grove::Error(groveRemoteError) as soon as the
// executor needs bytes that can no longer come (or sends bytes that can no
// longer go).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/socket.h"
#include "transports/transport.h"

namespace grove::transport {

/// Sending half over a TCP socket with a staging ring.
class SocketSendHalf final : public SendHalf {
 public:
  /// Takes the connected socket (made non-blocking here) to `peer` on `channel`.
  SocketSendHalf(net::Fd fd, size_t capacity, int peer, int channel);
  size_t reserve(void** ptr) override;
  void commit(size_t n) override;
  bool flush() override;
  int pollFd() const override { return fd_.get(); }
  ptrdiff_t sendDirect(const void* src, size_t n) override;

 private:
  void push();
  [[noreturn]] void closedError(int err) const;
  net::Fd fd_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t cap_;
  uint64_t head_ = 0;  // committed
  uint64_t tail_ = 0;  // handed to the kernel
  int peer_, channel_;
};

/// Receiving half over a TCP socket with a receive ring.
class SocketRecvHalf final : public RecvHalf {
 public:
  /// Takes the accepted socket (made non-blocking here) from `peer` on `channel`.
  SocketRecvHalf(net::Fd fd, size_t capacity, int peer, int channel);
  size_t peek(const void** ptr) override;
  void consume(size_t n) override;
  int pollFd() const override { return fd_.get(); }
  ptrdiff_t recvDirect(void* dst, size_t n) override;

 private:
  void pull();
  [[noreturn]] void closedError() const;
  net::Fd fd_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t cap_;
  uint64_t head_ = 0;  // received
  uint64_t tail_ = 0;  // consumed
  bool eof_ = false;
  int closeErr_ = 0;  // errno of a reset, 0 for a clean EOF
  int peer_, channel_;
};

}  // namespace grove::transport
