// Structural validation of the programs of all ranks (see validate.h).
#include "ir/validate.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/dtype.h"
#include "base/error.h"
#include "ir/step_traits.h"

namespace grove::plan {

BufferSizes bufferSizesFor(const CollArgs& a) {
  const uint64_t b = a.count * dtypeSize(a.dtype);
  const uint64_t all = b * static_cast<uint64_t>(a.nranks);
  const bool root = a.rank == a.root;
  BufferSizes s;
  switch (a.coll) {
    case Coll::kAllReduce:
      s.input = b;
      s.output = b;
      break;
    case Coll::kBroadcast:
      s.input = root ? b : 0;
      s.output = b;
      break;
    case Coll::kReduce:
      s.input = b;
      s.output = root ? b : 0;
      break;
    case Coll::kAllGather:
      s.input = b;
      s.output = all;
      break;
    case Coll::kReduceScatter:
      s.input = all;
      s.output = b;
      break;
    case Coll::kGather:
      s.input = b;
      s.output = root ? all : 0;
      break;
    case Coll::kScatter:
      s.input = root ? all : 0;
      s.output = b;
      break;
    case Coll::kAlltoAll:
      s.input = all;
      s.output = all;
      break;
    case Coll::kSendRecv: break;
  }
  return s;
}

namespace {

using LinkId = std::tuple<int, int, int>;  // (src rank, dst rank, channel)

/// Where a step sits, for messages.
struct Site {
  int rank = 0;
  size_t phase = 0, lane = 0, step = 0;
  const Step* s = nullptr;
};

std::string siteText(const Site& w) {
  return "rank " + std::to_string(w.rank) + " phase " + std::to_string(w.phase) + " lane " +
         std::to_string(w.lane) + " step " + std::to_string(w.step) + " (" + describe(*w.s) + ")";
}

std::string linkText(const LinkId& l) {
  return "link " + std::to_string(std::get<0>(l)) + "->" + std::to_string(std::get<1>(l)) +
         " channel " + std::to_string(std::get<2>(l));
}

[[noreturn]] void fail(const std::string& msg) { throwInternalError("validatePrograms: " + msg); }

void checkRef(const Site& w, const char* role, const BufRef& ref, uint64_t bytes,
              const ValidateOptions& opt, uint64_t scratchBytes) {
  if (ref.offset % opt.elemSize != 0)
    fail(siteText(w) + ": " + role + " offset not a multiple of the element size " +
         std::to_string(opt.elemSize));
  if (opt.sizes.empty()) return;
  const BufferSizes& sz = opt.sizes[w.rank];
  uint64_t size = 0;
  switch (ref.buf) {
    case Buf::kInput: size = sz.input; break;
    case Buf::kOutput: size = sz.output; break;
    case Buf::kScratch: size = scratchBytes; break;
    case Buf::kExtra:
      if (ref.index >= sz.extra.size())
        fail(siteText(w) + ": " + role + " names extra buffer " + std::to_string(ref.index) +
             " but the rank has " + std::to_string(sz.extra.size()));
      size = sz.extra[ref.index];
      break;
  }
  if (ref.offset > size || bytes > size - ref.offset)
    fail(siteText(w) + ": " + role + " range [" + std::to_string(ref.offset) + ", " +
         std::to_string(ref.offset + bytes) + ") exceeds the " + bufName(ref.buf) + " buffer (" +
         std::to_string(size) + " B)");
}

/// The extra send peers: only on sending kinds, used entries first, each a
/// valid rank, none repeated (with sendPeer either).
void checkFanOut(const Site& w, int nranks) {
  const Step& s = *w.s;
  const int n = sendPeerCount(s);
  for (int i = std::max(n, 1); i <= kMaxMoreSendPeers; ++i)
    if (s.moreSendPeers[i - 1] >= 0)
      fail(siteText(w) + (stepSends(s.kind)
                              ? ": moreSendPeers has a used entry after an unused (-1) one"
                              : ": moreSendPeers set on a step kind that does not send"));
  for (int i = 1; i < n; ++i) {
    const int peer = sendPeerAt(s, i);
    if (peer >= nranks || peer == w.rank)
      fail(siteText(w) + ": extra send peer " + std::to_string(peer) +
           (peer == w.rank ? " is the rank itself" : " out of range"));
    for (int j = 0; j < i; ++j)
      if (sendPeerAt(s, j) == peer)
        fail(siteText(w) + ": sends to rank " + std::to_string(peer) + " twice");
  }
}

/// The extra receive peers: only on the reducing receives, used entries
/// first, each a valid rank, none repeated (with recvPeer either).
void checkFanIn(const Site& w, int nranks) {
  const Step& s = *w.s;
  const int n = recvPeerCount(s);
  for (int i = std::max(n, 1); i <= kMaxMoreRecvPeers; ++i)
    if (s.moreRecvPeers[i - 1] >= 0)
      fail(siteText(w) + (stepMayFanIn(s.kind)
                              ? ": moreRecvPeers has a used entry after an unused (-1) one"
                              : ": moreRecvPeers set on a step kind that cannot fan in"));
  for (int i = 1; i < n; ++i) {
    const int peer = recvPeerAt(s, i);
    if (peer >= nranks || peer == w.rank)
      fail(siteText(w) + ": extra receive peer " + std::to_string(peer) +
           (peer == w.rank ? " is the rank itself" : " out of range"));
    for (int j = 0; j < i; ++j)
      if (recvPeerAt(s, j) == peer)
        fail(siteText(w) + ": receives from rank " + std::to_string(peer) + " twice");
  }
}

void checkStep(const Site& w, int nranks, const ValidateOptions& opt, uint64_t scratchBytes) {
  const Step& s = *w.s;
  auto checkPeer = [&](int peer, const char* what) {
    if (peer < 0 || peer >= nranks)
      fail(siteText(w) + ": " + what + " peer " + std::to_string(peer) + " out of range [0," +
           std::to_string(nranks) + ")");
    if (peer == w.rank) fail(siteText(w) + ": " + what + " peer is the rank itself");
  };
  if (stepSends(s.kind)) checkPeer(s.sendPeer, "send");
  checkFanOut(w, nranks);
  if (stepReceives(s.kind)) checkPeer(s.recvPeer, "receive");
  checkFanIn(w, nranks);
  if (!stepIsLocal(s.kind) && s.channel < 0) fail(siteText(w) + ": negative channel");
  if (s.bytes % opt.elemSize != 0)
    fail(siteText(w) + ": " + std::to_string(s.bytes) +
         " B is not a multiple of the element size " + std::to_string(opt.elemSize));
  if (stepReadsSrc(s.kind)) checkRef(w, "src", s.src, s.bytes, opt, scratchBytes);
  if (stepWritesDst(s.kind)) {
    if (s.dst.buf == Buf::kInput) fail(siteText(w) + ": writes the input buffer");
    checkRef(w, "dst", s.dst, s.bytes, opt, scratchBytes);
  }
}

/// Records that lane `lane` of the current phase uses link `id` on one end;
/// fails if another lane of the same phase already does.
void claim(std::map<LinkId, size_t>& owners, const LinkId& id, const Site& w, const char* end) {
  auto [it, added] = owners.try_emplace(id, w.lane);
  if (!added && it->second != w.lane)
    fail(siteText(w) + ": " + linkText(id) + " is " + end + " by lanes " +
         std::to_string(it->second) + " and " + std::to_string(w.lane) +
         " of the same phase (order undefined)");
}

void compareLink(const LinkId& id, const std::vector<Site>& sent, const std::vector<Site>& recvd) {
  const size_t n = std::max(sent.size(), recvd.size());
  for (size_t i = 0; i < n; ++i) {
    if (i >= sent.size())
      fail(linkText(id) + ": receive #" + std::to_string(i) + " at " + siteText(recvd[i]) +
           " has no matching send (only " + std::to_string(sent.size()) + " sends)");
    if (i >= recvd.size())
      fail(linkText(id) + ": send #" + std::to_string(i) + " at " + siteText(sent[i]) +
           " has no matching receive (only " + std::to_string(recvd.size()) + " receives)");
    if (sent[i].s->bytes != recvd[i].s->bytes)
      fail(linkText(id) + ": step #" + std::to_string(i) + " sends " +
           std::to_string(sent[i].s->bytes) + " B at " + siteText(sent[i]) + " but receives " +
           std::to_string(recvd[i].s->bytes) + " B at " + siteText(recvd[i]));
  }
}

}  // namespace

void validatePrograms(const std::vector<Program>& perRank, const ValidateOptions& opt) {
  const int n = static_cast<int>(perRank.size());
  if (opt.elemSize == 0) fail("element size 0");
  if (!opt.sizes.empty() && opt.sizes.size() != perRank.size())
    fail(std::to_string(opt.sizes.size()) + " buffer size sets for " + std::to_string(n) +
         " ranks");
  std::map<LinkId, std::vector<Site>> sent, recvd;
  for (int r = 0; r < n; ++r) {
    const Program& prog = perRank[r];
    for (size_t ph = 0; ph < prog.phases.size(); ++ph) {
      std::map<LinkId, size_t> sendOwners, recvOwners;
      const Phase& phase = prog.phases[ph];
      for (size_t l = 0; l < phase.lanes.size(); ++l) {
        const Lane& lane = phase.lanes[l];
        for (size_t i = 0; i < lane.steps.size(); ++i) {
          const Site w{r, ph, l, i, &lane.steps[i]};
          checkStep(w, n, opt, prog.scratchBytes);
          const Step& s = lane.steps[i];
          forEachSendPeer(s, [&](int peer) {
            const LinkId id{r, peer, s.channel};
            claim(sendOwners, id, w, "sent on");
            sent[id].push_back(w);
          });
          forEachRecvPeer(s, [&](int peer) {
            const LinkId id{peer, r, s.channel};
            claim(recvOwners, id, w, "received from");
            recvd[id].push_back(w);
          });
        }
      }
    }
  }
  static const std::vector<Site> kNone;
  for (const auto& [id, sites] : sent) {
    auto it = recvd.find(id);
    compareLink(id, sites, it == recvd.end() ? kNone : it->second);
  }
  for (const auto& [id, sites] : recvd)
    if (sent.find(id) == sent.end()) compareLink(id, kNone, sites);
}

}  // namespace grove::plan
