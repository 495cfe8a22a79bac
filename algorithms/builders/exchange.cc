// Exchange algorithms: gather, scatter and all-to-all, each block going
// straight from the rank that has it to the rank that needs it.
//
// How it works:
//
// Gather: every rank but the root sends its block to the root; the root has
// one receive lane per peer, writing block q at offset q*blockBytes of its
// output, and (out of place) a lane that copies its own block.
// Scatter: the mirror image; the root has one send lane per peer, reading
// block q at offset q*blockBytes of its input, and every other rank receives
// its block into its output.
// All-to-all: every rank has one send lane and one receive lane per peer
// (block q of the input goes to rank q; block q of the output comes from
// rank q), plus a lane that copies block rank to block rank locally.
//
// Every link is a separate lane of a single phase, so sends and receives
// progress independently and the exchange cannot deadlock whatever the block
// size; peers are visited starting at rank+1 (send) and rank-1 (receive), so
// that the ranks do not all address the same peer first. No chunking is
// needed: a step streams through the link buffer.
//
// Channels: with PlanParams::nChannels > 1 each block is cut into that many
// near-equal element ranges, range k on channel k, a lane each (on a GPU a
// lane is one thread block, which alone moves a few tens of GB/s). At most
// kMaxLinkLanes lanes go to sends (and as many to receives) of one rank, so
// many peers get fewer channels each.
#include <algorithm>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "base/error.h"

namespace grove::plan {

using detail::modRank;
using detail::ref;

namespace {

constexpr int kMaxLinkLanes = 32;

/// How one block crosses a link: in `channels` element ranges.
struct Cut {
  uint64_t count = 0;  ///< elements of a block
  uint64_t es = 0;     ///< element size
  int channels = 1;
};

Cut cutOf(const CollArgs& a, const PlanParams& p, uint64_t es) {
  const int perPeer = std::max(1, kMaxLinkLanes / std::max(1, a.nranks - 1));
  return Cut{a.count, es, std::clamp(p.nChannels, 1, perPeer)};
}

void addSend(Phase& phase, int peer, BufRef src, const Cut& cut) {
  for (int k = 0; k < cut.channels; ++k) {
    const detail::Span s = detail::evenSplit(cut.count, cut.channels, k);
    const BufRef at{src.buf, src.index, src.offset + s.offset * cut.es};
    detail::addLane(phase, detail::sendLane(peer, at, s.count * cut.es, k));
  }
}

void addRecv(Phase& phase, int peer, BufRef dst, const Cut& cut) {
  for (int k = 0; k < cut.channels; ++k) {
    const detail::Span s = detail::evenSplit(cut.count, cut.channels, k);
    const BufRef at{dst.buf, dst.index, dst.offset + s.offset * cut.es};
    detail::addLane(phase, detail::recvLane(peer, at, s.count * cut.es, k));
  }
}

void addCopy(Phase& phase, BufRef src, BufRef dst, uint64_t bytes) {
  detail::addLane(phase, detail::copyLane(src, dst, bytes));
}

uint64_t blockAt(int q, uint64_t bytes) { return static_cast<uint64_t>(q) * bytes; }

}  // namespace

Program buildGather(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "gather");
  const uint64_t bytes = a.count * es;
  const Cut cut = cutOf(a, p, es);
  Program prog;
  prog.algo = "direct";
  if (bytes == 0) return prog;
  Phase phase;
  if (a.rank != a.root) {
    addSend(phase, a.root, ref(Buf::kInput, 0), cut);
  } else {
    for (int i = 1; i < a.nranks; ++i) {
      const int q = modRank(a.rank - i, a.nranks);
      addRecv(phase, q, ref(Buf::kOutput, blockAt(q, bytes)), cut);
    }
    if (!a.inPlace)
      addCopy(phase, ref(Buf::kInput, 0), ref(Buf::kOutput, blockAt(a.rank, bytes)), bytes);
  }
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildScatter(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "scatter");
  const uint64_t bytes = a.count * es;
  const Cut cut = cutOf(a, p, es);
  Program prog;
  prog.algo = "direct";
  if (bytes == 0) return prog;
  Phase phase;
  if (a.rank != a.root) {
    addRecv(phase, a.root, ref(Buf::kOutput, 0), cut);
  } else {
    for (int i = 1; i < a.nranks; ++i) {
      const int q = modRank(a.rank + i, a.nranks);
      addSend(phase, q, ref(Buf::kInput, blockAt(q, bytes)), cut);
    }
    if (!a.inPlace)
      addCopy(phase, ref(Buf::kInput, blockAt(a.rank, bytes)), ref(Buf::kOutput, 0), bytes);
  }
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildAlltoAll(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "alltoall");
  const uint64_t bytes = a.count * es;
  const Cut cut = cutOf(a, p, es);
  Program prog;
  prog.algo = "direct";
  if (bytes == 0) return prog;
  // In place (NCCL allows it): the blocks that leave are first copied to
  // scratch, so that the receives may overwrite them; the own block stays.
  Buf from = Buf::kInput;
  if (a.inPlace) {
    Phase stage;
    for (int i = 1; i < a.nranks; ++i) {
      const int q = modRank(a.rank + i, a.nranks);
      addCopy(stage, ref(Buf::kInput, blockAt(q, bytes)), ref(Buf::kScratch, blockAt(q, bytes)),
              bytes);
    }
    detail::addPhase(prog, std::move(stage));
    prog.scratchBytes = static_cast<uint64_t>(a.nranks) * bytes;
    from = Buf::kScratch;
  }
  Phase phase;
  for (int i = 1; i < a.nranks; ++i) {
    const int q = modRank(a.rank + i, a.nranks);
    addSend(phase, q, ref(from, blockAt(q, bytes)), cut);
  }
  for (int i = 1; i < a.nranks; ++i) {
    const int q = modRank(a.rank - i, a.nranks);
    addRecv(phase, q, ref(Buf::kOutput, blockAt(q, bytes)), cut);
  }
  if (!a.inPlace)
    addCopy(phase, ref(Buf::kInput, blockAt(a.rank, bytes)),
            ref(Buf::kOutput, blockAt(a.rank, bytes)), bytes);
  detail::addPhase(prog, std::move(phase));
  return prog;
}

}  // namespace grove::plan
