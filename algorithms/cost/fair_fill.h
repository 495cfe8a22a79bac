// Max-min fair rates of transfers sharing links (progressive filling), the
// rates of the flow simulator between two events.
#pragma once

#include <span>
#include <utility>
#include <vector>

namespace grove::plan {

/// Rates of transfers over a fixed set of paths (each a list of links with
/// a capacity), shared max-min fairly, each transfer perhaps capped.
class FairFill {
 public:
  FairFill() = default;
  /// `linkBps`: every link's capacity in bytes/s; `paths`: the link lists
  /// transfers may cross (indices into linkBps).
  FairFill(std::vector<double> linkBps, const std::vector<std::vector<int>>& paths);

  /// The rate (bytes/s) of each transfer k, over paths[path[k]] and capped
  /// by cap[k] (infinity: no cap; <= 0: it does not flow, rate 0); it
  /// stands for count[k] >= 1 identical transfers, each at that rate. A
  /// transfer that crosses no link and has no cap gets infinity.
  void rates(std::span<const int> path, std::span<const int> count, std::span<const double> cap,
             std::span<double> rate);
  /// The same, and transfer f of every pair (f, l) in `follow` never goes
  /// faster than transfer l (a forward that has caught up with its input):
  /// it rises with l and stops when l does, or sooner on its own links or
  /// cap; it does not flow while l does not. The pairs form no cycle.
  void rates(std::span<const int> path, std::span<const int> count, std::span<const double> cap,
             std::span<const std::pair<int, int>> follow, std::span<double> rate);

 private:
  /// Transfers over one path without a cap, or one capped transfer.
  struct Group {
    int path = 0;
    int count = 0;  ///< transfers in it
    double cap = 0;
    double rate = 0;
    bool frozen = false;
  };
  std::span<const int> linksOf(int path) const;
  void groupTransfers(std::span<const int> path, std::span<const int> count,
                      std::span<const double> cap, std::span<const std::pair<int, int>> follow);
  void openLinks();
  void raise();
  void freezeAt(int gi, double level, size_t& left);

  std::vector<double> linkBps_;
  std::vector<int> pathLinks_, pathBegin_;  ///< linksOf(p)
  // Scratch of one rates() call, kept for its capacity:
  std::vector<Group> groups_;
  std::vector<int> groupOf_;                  ///< by transfer: its group, or -1 (a cap of 0)
  std::vector<int> groupOfPath_;              ///< by path: its uncapped group, or -1
  std::vector<double> linkRem_;               ///< by link: what the frozen groups left of it
  std::vector<int> linkUsers_;                ///< by link: unfrozen transfers crossing it
  std::vector<std::vector<int>> linkGroups_;  ///< by link: the groups crossing it
  std::vector<char> linkListed_;              ///< by link: in usedLinks_
  std::vector<int> usedLinks_, openLinks_, capped_;
  std::vector<char>
      stopped_;  ///< by transfer: does not flow (cap <= 0, or follows one that does not)
  std::vector<int> leaderOf_;           ///< by transfer: the one it follows (-1 none, -2 several)
  std::vector<int> followGroupOfPath_;  ///< by path: the last group of followers over it, or -1
  std::vector<int> leadOf_;             ///< by group: the group its followers follow, or -1
  std::vector<std::vector<int>> followers_;  ///< by group: the groups that stop with it
  bool anyFollow_ = false;                   ///< this call has followers
};

}  // namespace grove::plan
