// Adding a transport touches no core code: this test writes a throw-away
// byte transport ("mailbox": links are mutex-guarded byte queues between
// threads of one process, nothing like the built-in ones), adds its row to
// the registry at run time, and runs communicators over it through the C
// API -- the core picks it up from the row alone, as it does shm or socket.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "grove/grove.h"
#include "transports/registry.h"

namespace grove::transport {
namespace {

// One directed link: a byte queue bounded by the communicator's buffer
// size (the executor counts on a half holding Context::bufferBytes).
struct Mailbox {
  std::mutex mu;
  std::deque<uint8_t> bytes;
  size_t capacity = 0;
};

std::atomic<uint64_t> gBytesMoved{0};
std::atomic<int> gLinksOpened{0};

std::shared_ptr<Mailbox> mailbox(const Context& ctx, int src, int dst, const LinkKey& key) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, int, int, int, uint32_t>, std::shared_ptr<Mailbox>> all;
  std::lock_guard<std::mutex> lock(mu);
  auto& box = all[{ctx.jobId, src, dst, key.channel, key.route}];
  if (!box) {
    box = std::make_shared<Mailbox>();
    box->capacity = ctx.bufferBytes;
  }
  return box;
}

class MailboxSend final : public SendHalf {
 public:
  explicit MailboxSend(std::shared_ptr<Mailbox> box) : box_(std::move(box)), staging_(64 << 10) {}
  size_t reserve(void** ptr) override {
    std::lock_guard<std::mutex> lock(box_->mu);
    const size_t room = box_->capacity - std::min(box_->capacity, box_->bytes.size());
    *ptr = staging_.data();
    return std::min(room, staging_.size());
  }
  void commit(size_t n) override {
    std::lock_guard<std::mutex> lock(box_->mu);
    box_->bytes.insert(box_->bytes.end(), staging_.begin(), staging_.begin() + n);
    gBytesMoved += n;
  }

 private:
  std::shared_ptr<Mailbox> box_;
  std::vector<uint8_t> staging_;
};

class MailboxRecv final : public RecvHalf {
 public:
  explicit MailboxRecv(std::shared_ptr<Mailbox> box) : box_(std::move(box)) {}
  size_t peek(const void** ptr) override {
    if (at_ == got_.size()) {
      got_.clear();
      at_ = 0;
      std::lock_guard<std::mutex> lock(box_->mu);
      const size_t n = std::min<size_t>(box_->bytes.size(), 64 << 10);
      got_.assign(box_->bytes.begin(), box_->bytes.begin() + n);
      box_->bytes.erase(box_->bytes.begin(), box_->bytes.begin() + n);
    }
    *ptr = got_.data() + at_;
    return got_.size() - at_;
  }
  void consume(size_t n) override { at_ += n; }

 private:
  std::shared_ptr<Mailbox> box_;
  std::vector<uint8_t> got_;
  size_t at_ = 0;
};

class MailboxTransport final : public Transport {
 public:
  explicit MailboxTransport(Context ctx) : ctx_(std::move(ctx)) {}
  const char* name() const override { return "mailbox"; }
  bool canConnect(int peer) const override { return peer >= 0 && peer < ctx_.nranks; }
  void establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                 std::vector<std::unique_ptr<SendHalf>>& outSends,
                 std::vector<std::unique_ptr<RecvHalf>>& outRecvs) override {
    for (const LinkKey& k : sends)
      outSends.push_back(std::make_unique<MailboxSend>(mailbox(ctx_, ctx_.rank, k.peer, k)));
    for (const LinkKey& k : recvs)
      outRecvs.push_back(std::make_unique<MailboxRecv>(mailbox(ctx_, k.peer, ctx_.rank, k)));
    gLinksOpened += static_cast<int>(sends.size() + recvs.size());
  }

 private:
  Context ctx_;
};

class NoAddress final : public Endpoint {
 public:
  Address address() const override { return Address{}; }
};

// The whole of what adding a transport asks for: one row.
TransportEntry mailboxRow() {
  return TransportEntry{
      .name = "mailbox",
      .description = "mutex-guarded byte queues between threads (a test's throw-away transport)",
      .priority = 0,  // only when named
      .traits = {.latencyUs = 5, .stepOverheadUs = 5, .sharedMemory = true},
      .provides = kByteStreams,
      .canConnect =
          [](const PeerEnd& a, const PeerEnd& b) {
            return a.info.hostHash == b.info.hostHash && a.info.pid == b.info.pid;
          },
      .open = [](const OpenArgs&) -> std::unique_ptr<Endpoint> {
        return std::make_unique<NoAddress>();
      },
      .make = [](const Context& ctx, std::unique_ptr<Endpoint>) -> std::unique_ptr<Transport> {
        return std::make_unique<MailboxTransport>(ctx);
      },
      .makeDevice = nullptr};
}

void onRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

TEST(RegistryExtension, AThrowAwayTransportCarriesCommunicators) {
  // Rows are checked before they join (nothing has read the registry yet).
  auto refusedAs = [](TransportEntry row, groveResult_t code) {
    try {
      registerTransport(std::move(row));
      return false;
    } catch (const Error& e) {
      return e.code() == code;
    }
  };
  EXPECT_TRUE(refusedAs(TransportEntry{}, groveInvalidArgument)) << "a row without a name";
  TransportEntry taken = mailboxRow();
  taken.name = "SOCKET";
  EXPECT_TRUE(refusedAs(taken, groveInvalidArgument)) << "a taken name";
  TransportEntry half = mailboxRow();
  half.name = "half-made";
  half.make = nullptr;
  EXPECT_TRUE(refusedAs(half, groveInvalidArgument)) << "byte streams but no make";
  TransportEntry idle = mailboxRow();
  idle.name = "idle";
  idle.provides = 0;
  EXPECT_TRUE(refusedAs(idle, groveInvalidArgument)) << "provides nothing";
  registerTransport(mailboxRow());
  ASSERT_NE(findTransport("mailbox"), nullptr);
  constexpr int kRanks = 3;
  constexpr size_t kCount = (1 << 18) + 7;
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  std::vector<groveComm_t> comms(kRanks, nullptr);
  onRanks(kRanks, [&](int r) {
    groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
    cfg.transport = "mailbox";
    cfg.commName = "mailbox";
    EXPECT_EQ(groveCommInitRankConfig(&comms[r], kRanks, id, r, &cfg), groveSuccess)
        << groveGetLastError(nullptr);
  });
  ASSERT_TRUE(comms[0] && comms[1] && comms[2]);
  onRanks(kRanks, [&](int r) {
    std::vector<float> v(kCount);
    for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<float>((i % 97) * (r + 1));
    ASSERT_EQ(groveAllReduce(v.data(), v.data(), kCount, groveFloat32, groveSum, comms[r], nullptr),
              groveSuccess)
        << groveGetLastError(comms[r]);
    for (size_t i = 0; i < kCount; i += 4099) EXPECT_EQ(v[i], static_cast<float>((i % 97) * 6));
    std::vector<int32_t> all(kRanks * 5, -1), mine(5, r * 10);
    ASSERT_EQ(groveAllGather(mine.data(), all.data(), 5, groveInt32, comms[r], nullptr),
              groveSuccess)
        << groveGetLastError(comms[r]);
    for (int q = 0; q < kRanks; ++q) EXPECT_EQ(all[q * 5 + 4], q * 10);
    EXPECT_EQ(groveCommDestroy(comms[r]), groveSuccess);
  });
  EXPECT_GE(gLinksOpened.load(), 2 * kRanks);
  EXPECT_GE(gBytesMoved.load(), kCount * sizeof(float));
  EXPECT_EQ(findTransport("half-made"), nullptr);
  EXPECT_EQ(findTransport("idle"), nullptr);
  // Once the registry has been read, its rows (and their slots) are fixed.
  TransportEntry late = mailboxRow();
  late.name = "mailbox-2";
  EXPECT_TRUE(refusedAs(late, groveInvalidUsage));
  EXPECT_EQ(findTransport("mailbox-2"), nullptr);
}

}  // namespace
}  // namespace grove::transport
