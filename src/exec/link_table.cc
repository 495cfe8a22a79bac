// The map-backed link table and collectLinks: which links a program uses.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "exec/host_executor.h"
#include "ir/step_traits.h"

namespace grove::exec {

using transport::LinkKey;

// ------------------------------------------------------------------ link table

SendLink& MapLinkTable::sendLink(const LinkKey& key) {
  auto it = sends_.find(key);
  if (it == sends_.end()) {
    throwInternalError("host executor: no send link to peer " + std::to_string(key.peer) +
                       " on channel " + std::to_string(key.channel));
  }
  return it->second;
}

RecvLink& MapLinkTable::recvLink(const LinkKey& key) {
  auto it = recvs_.find(key);
  if (it == recvs_.end()) {
    throwInternalError("host executor: no receive link from peer " + std::to_string(key.peer) +
                       " on channel " + std::to_string(key.channel));
  }
  return it->second;
}

void MapLinkTable::addSend(const LinkKey& key, std::unique_ptr<transport::SendHalf> half) {
  SendLink link;
  link.half = std::move(half);
  sends_[key] = std::move(link);
}

void MapLinkTable::addRecv(const LinkKey& key, std::unique_ptr<transport::RecvHalf> half) {
  RecvLink link;
  link.half = std::move(half);
  recvs_[key] = std::move(link);
}

// ------------------------------------------------------------------ collectLinks

// Appends to what the vectors hold, then sorts and deduplicates them, so it
// also gives the union over several programs.
void collectLinks(const plan::Program& program, std::vector<LinkKey>& sends,
                  std::vector<LinkKey>& recvs) {
  for (const auto& phase : program.phases) {
    for (const auto& lane : phase.lanes) {
      for (const auto& s : lane.steps) {
        plan::forEachSendPeer(s, [&](int peer) { sends.push_back(LinkKey{peer, s.channel}); });
        plan::forEachRecvPeer(s, [&](int peer) { recvs.push_back(LinkKey{peer, s.channel}); });
      }
    }
  }
  for (auto* v : {&sends, &recvs}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
}

}  // namespace grove::exec
