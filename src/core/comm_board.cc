// Comm's use of the call board (core/call_board.h): mapping the host's
// pages at init, the probe of blocked waits, and the hang doctor of this
// host when the bootstrap root cannot answer.
#include "base/log.h"
#include "core/bootstrap.h"
#include "core/bootstrap_root.h"
#include "core/call_board.h"
#include "core/comm.h"

namespace grove::core {

void Comm::openCallBoard(const transport::PeerInfo& self) {
  if (!board_) return;
  const std::vector<transport::PeerInfo>& peers = bootstrap_->peers();
  std::vector<int> local, pids(peers.size(), 0);
  for (size_t r = 0; r < peers.size(); ++r) {
    pids[r] = peers[r].pid;
    if (peers[r].hostHash == self.hostHash && static_cast<int>(r) != rank_)
      local.push_back(static_cast<int>(r));
  }
  board_->openPeers(local, pids);
  boardChecked_.assign(peers.size(), 0);
  p2pSent_.assign(peers.size(), 0);
  p2pReceived_.assign(peers.size(), 0);
  boardNames_.resize(peers.size());
  for (size_t r = 0; r < peers.size(); ++r)
    boardNames_[r] = describeRank(static_cast<int>(r), peers[r]);
  // Blocked waits look at the board (GROVE_CHECK=none turns the checks off).
  // Not on CUDA communicators: their waits are the device engine's, and
  // each launch looks at the board once, before it starts
  // (beginDeviceCalls).
  const bool cuda = options_.deviceKind == groveDeviceCuda;
  if (options_.tagCalls && !cuda && !board_->peers().empty()) {
    probe_ = std::make_unique<CallBoardProbe>(board_.get(), tracker_.get());
    wait_.probe = probe_.get();
  }
  bootstrap_->setHostDoctor([this] { return hostDoctor(); });
}

void Comm::checkRootOnBoard(const plan::CollArgs& args) const {
  if (!probe_) return;
  const bool root = args.root == rank_;
  // The roles that may receive nothing, so that no tag could show them a
  // peer in another call: the root of a broadcast or scatter, the others of
  // a reduce or gather.
  const bool sendsOnly =
      ((args.coll == plan::Coll::kBroadcast || args.coll == plan::Coll::kScatter) && root) ||
      ((args.coll == plan::Coll::kReduce || args.coll == plan::Coll::kGather) && !root);
  if (sendsOnly) probe_->probe();
}

std::string Comm::doctorSuffix(bool* remote) {
  if (!bootstrap_) return "";
  // The root's diagnosis, else (its process died or stopped) this host's
  // board; nothing when another rank ended the job meanwhile, diagnosed.
  const std::string diagnosis = bootstrap_->doctor(kReportWindowSec + 1.0, [&] {
    *remote = abort_.raised();
    return *remote && abort_.reason().find("hang doctor") != std::string::npos;
  });
  return diagnosis.empty() ? "" : " -- hang doctor: " + diagnosis;
}

// Runs on the caller's thread or on the bootstrap's watcher (which may run
// while abort() resets bootstrap_): it touches only the board, the tracker
// and the names cached at init, all of which outlive the bootstrap.
std::string Comm::hostDoctor() {
  if (!board_ || boardNames_.empty()) return "";
  std::string text = hostDiagnosis(*board_, tracker_->snapshot(), boardNames_, 0.5);
  GROVE_WARN(log::kBoot, "hang doctor (rank %d, from this host's call board): %s", rank_,
             text.c_str());
  return text;
}

}  // namespace grove::core
