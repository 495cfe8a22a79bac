#include "exec/eager.h"

#include <cstring>
#include <string>
#include <utility>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/cpu/reduce.h"

namespace grove::exec {

using plan::Coll;

EagerCollectives::EagerCollectives(int rank, int nranks, size_t maxBytes, bool tags,
                                   std::vector<std::unique_ptr<transport::SlotSender>> sends,
                                   std::vector<std::unique_ptr<transport::SlotReceiver>> recvs)
    : rank_(rank),
      nranks_(nranks),
      maxBytes_(maxBytes),
      tags_(tags),
      sends_(std::move(sends)),
      recvs_(std::move(recvs)),
      source_(nranks, nullptr),
      aside_(maxBytes) {
  if (static_cast<int>(sends_.size()) != nranks || static_cast<int>(recvs_.size()) != nranks)
    throwInternalError("eager collectives need one slot link per rank each way");
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    if (!sends_[p] || !recvs_[p] || sends_[p]->maxBytes() < slotBytes(maxBytes, tags))
      throwInternalError("eager collectives: the slot link to rank " + std::to_string(p) +
                         " is missing or too small");
  }
  expect_.reserve(nranks);
  arrived_.reserve(nranks);
}

EagerCollectives::~EagerCollectives() = default;

uint64_t EagerCollectives::blockBytes(const plan::CollArgs& args) {
  return args.count * dtypeSize(args.dtype);
}

void EagerCollectives::post(int peer, const void* src, size_t bytes, Waiter& waiter) {
  transport::SlotSender& link = *sends_[peer];
  void* slot;
  while ((slot = link.acquire()) == nullptr) {
    waiter.context().noteBlockedOn(-1, peer);
    waiter.wait();
  }
  std::memcpy(slot, src, bytes);
  if (!tags_) {
    link.post(bytes);
    return;
  }
  std::memcpy(static_cast<uint8_t*>(slot) + bytes, &tag_, sizeof(tag_));
  link.post(bytes + sizeof(tag_));
}

void EagerCollectives::postToEach(const uint8_t* base, size_t stride, size_t bytes,
                                  Waiter& waiter) {
  // Start with the next rank, so that ranks do not all write to rank 0 first.
  for (int i = 1; i < nranks_; ++i) {
    const int p = (rank_ + i) % nranks_;
    post(p, base + static_cast<size_t>(p) * stride, bytes, waiter);
  }
}

void EagerCollectives::receiveFrom(int peer, void* out, size_t bytes, Waiter& waiter) {
  expect_.push_back(peer);
  awaitAll(bytes, waiter);
  std::memcpy(out, source_[peer], bytes);
}

void EagerCollectives::placeArrived(uint8_t* out, size_t bytes) {
  for (int p : arrived_) std::memcpy(out + static_cast<size_t>(p) * bytes, source_[p], bytes);
}

void EagerCollectives::awaitOthers(const void* own, size_t bytes, Waiter& waiter) {
  source_[rank_] = own;
  for (int p = 0; p < nranks_; ++p)
    if (p != rank_) expect_.push_back(p);
  awaitAll(bytes, waiter);
}

void EagerCollectives::awaitAll(size_t bytes, Waiter& waiter) {
  while (!expect_.empty()) {
    bool moved = false;
    for (size_t i = 0; i < expect_.size();) {
      const int peer = expect_[i];
      size_t n = 0;
      const void* msg = recvs_[peer]->poll(&n);
      if (msg == nullptr) {
        ++i;
        continue;
      }
      if (tags_ && n >= sizeof(EagerTag)) {  // the peer's call, before its size
        EagerTag got;
        std::memcpy(&got, static_cast<const uint8_t*>(msg) + n - sizeof(got), sizeof(got));
        checkEagerTag(got, tag_, peer, rank_);
        n -= sizeof(EagerTag);
      }
      if (n != bytes)
        throwInvalidUsage("rank " + std::to_string(peer) + " sent a " + std::to_string(n) +
                          "-byte block where rank " + std::to_string(rank_) + " expected " +
                          std::to_string(bytes) +
                          ": the ranks called different collectives, counts or types");
      source_[peer] = msg;
      arrived_.push_back(peer);
      expect_[i] = expect_.back();
      expect_.pop_back();
      moved = true;
    }
    if (expect_.empty()) break;
    if (moved) waiter.progressed();
    waiter.context().noteBlockedOn(expect_[0], -1);
    waiter.wait();
  }
}

void EagerCollectives::releaseAll() {
  for (int peer : arrived_) recvs_[peer]->release();
  arrived_.clear();
}

// out = source_[0] op source_[1] op ... op source_[n-1], left to right. The
// rank's own block may be `out` itself (in place): from step 1 on `out` holds
// the partial result, so an own block read later than step 1 is copied aside.
void EagerCollectives::reduceInRankOrder(const plan::CollArgs& args, void* out, size_t bytes) {
  const int own = rank_;
  if (own >= 2 && source_[own] == out) {
    std::memcpy(aside_.data(), out, bytes);
    source_[own] = aside_.data();
  }
  for (int k = 1; k < nranks_; ++k)
    kernels::reduce(args.dtype, args.op, out, nullptr, k == 1 ? source_[0] : out, source_[k],
                    args.count, k == nranks_ - 1, nranks_);
}

void EagerCollectives::run(const plan::CollArgs& args, const void* input, void* output,
                           const WaitContext& wait, uint8_t seq) {
  const size_t bytes = blockBytes(args);
  if (bytes > maxBytes_) throwInternalError("eager collective of a block larger than a slot");
  if (bytes == 0) return;  // every rank has the same count: nothing to exchange
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  auto block = [bytes](auto* base, int r) { return base + static_cast<size_t>(r) * bytes; };
  auto copyIn = [bytes](void* dst, const void* src) {
    if (dst != src) std::memmove(dst, src, bytes);
  };
  const int root = args.root;
  Waiter waiter(wait, "waiting for an eager collective's messages");
  tag_ = eagerTagOf(args, seq);
  expect_.clear();
  arrived_.clear();
  switch (args.coll) {
    case Coll::kAllReduce:
      postToEach(in, 0, bytes, waiter);
      awaitOthers(in, bytes, waiter);
      reduceInRankOrder(args, out, bytes);
      break;
    case Coll::kReduce:
      if (rank_ != root) {
        post(root, in, bytes, waiter);
        break;
      }
      awaitOthers(in, bytes, waiter);
      reduceInRankOrder(args, out, bytes);
      break;
    case Coll::kReduceScatter:
      postToEach(in, bytes, bytes, waiter);
      awaitOthers(block(in, rank_), bytes, waiter);
      reduceInRankOrder(args, out, bytes);
      break;
    case Coll::kBroadcast:
      if (rank_ == root) {
        postToEach(in, 0, bytes, waiter);
        copyIn(out, in);
        break;
      }
      receiveFrom(root, out, bytes, waiter);
      break;
    case Coll::kAllGather:
      postToEach(in, 0, bytes, waiter);
      copyIn(block(out, rank_), in);
      awaitOthers(nullptr, bytes, waiter);
      placeArrived(out, bytes);
      break;
    case Coll::kGather:
      if (rank_ != root) {
        post(root, in, bytes, waiter);
        break;
      }
      copyIn(block(out, rank_), in);
      awaitOthers(nullptr, bytes, waiter);
      placeArrived(out, bytes);
      break;
    case Coll::kScatter:
      if (rank_ == root) {
        postToEach(in, bytes, bytes, waiter);
        copyIn(out, block(in, rank_));
        break;
      }
      receiveFrom(root, out, bytes, waiter);
      break;
    case Coll::kAlltoAll:
      // Every block goes out before any arrives, so in == out works too.
      postToEach(in, bytes, bytes, waiter);
      copyIn(block(out, rank_), block(in, rank_));
      awaitOthers(nullptr, bytes, waiter);
      placeArrived(out, bytes);
      break;
    case Coll::kSendRecv: throwInternalError("send/recv does not run eagerly");
  }
  releaseAll();
}

}  // namespace grove::exec
