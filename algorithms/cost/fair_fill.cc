// Progressive filling; see fair_fill.h.
//
// How it works: every unfrozen transfer has the same rate, the level, which
// rises until a link fills (what the frozen transfers left of it, over the
// unfrozen transfers crossing it) or a transfer reaches its cap; those
// freeze at the level and the rest rise on, until all are frozen. That is
// the max-min fair allocation: no transfer can go faster without slowing
// one that is no faster than it.
//
// Transfers over the same path without a cap always end with the same rate, so
// they fill as one group of that many (a pipeline has a few hundred transfers
// in flight over a few dozen paths); a capped transfer is a group of its own. A
// transfer may stand for several identical ones (the simulator's merged
// copies): it counts that many times. A round costs the links in use and the
// groups, not the transfers times their routes.
//
// A transfer that follows another (a forward caught up with its input: it
// cannot send bytes it has not received) is a group of its own that rises
// with the level like every other and freezes when the one it follows
// freezes, at the same rate; if its own link fills first it freezes there,
// slower. That is the max-min fair allocation under "follower <= leader",
// found in one filling.
#include "algorithms/cost/fair_fill.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace grove::plan {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

FairFill::FairFill(std::vector<double> linkBps, const std::vector<std::vector<int>>& paths)
    : linkBps_(std::move(linkBps)) {
  for (const std::vector<int>& p : paths) {
    pathBegin_.push_back(static_cast<int>(pathLinks_.size()));
    for (int l : p) {
      if (l < 0 || l >= static_cast<int>(linkBps_.size()))
        throwInvalidArgument("FairFill: a path names link " + std::to_string(l) +
                             ", which does not exist");
      pathLinks_.push_back(l);
    }
  }
  pathBegin_.push_back(static_cast<int>(pathLinks_.size()));
  groupOfPath_.assign(paths.size(), -1);
  followGroupOfPath_.assign(paths.size(), -1);
  linkRem_.assign(linkBps_.size(), 0);
  linkUsers_.assign(linkBps_.size(), 0);
  linkGroups_.assign(linkBps_.size(), {});
  linkListed_.assign(linkBps_.size(), 0);
}

std::span<const int> FairFill::linksOf(int path) const {
  return {pathLinks_.data() + pathBegin_[path], pathLinks_.data() + pathBegin_[path + 1]};
}

void FairFill::rates(std::span<const int> path, std::span<const int> count,
                     std::span<const double> cap, std::span<double> rate) {
  rates(path, count, cap, {}, rate);
}

void FairFill::rates(std::span<const int> path, std::span<const int> count,
                     std::span<const double> cap, std::span<const std::pair<int, int>> follow,
                     std::span<double> rate) {
  groupTransfers(path, count, cap, follow);
  openLinks();
  raise();
  for (int l : usedLinks_) linkGroups_[l].clear(), linkListed_[l] = 0;
  for (size_t k = 0; k < path.size(); ++k)
    rate[k] = groupOf_[k] < 0 ? 0 : groups_[groupOf_[k]].rate;
}

/// The groups: one per path among the uncapped transfers, one per capped
/// or following transfer; and which groups stop with which.
void FairFill::groupTransfers(std::span<const int> path, std::span<const int> count,
                              std::span<const double> cap,
                              std::span<const std::pair<int, int>> follow) {
  const size_t n = path.size();
  anyFollow_ = !follow.empty();
  // leaderOf_: the transfer each follows (-1 none, -2 several).
  if (anyFollow_) {
    leaderOf_.assign(n, -1);
    for (const auto& [f, l] : follow) leaderOf_[f] = leaderOf_[f] == -1 ? l : -2;
  }
  stopped_.resize(n);
  bool anyStopped = false;
  for (size_t k = 0; k < n; ++k) {
    stopped_[k] = cap[k] <= 0;
    anyStopped = anyStopped || stopped_[k];
  }
  // A follower of one that does not flow does not flow (chains are short).
  for (bool more = anyFollow_ && anyStopped; more;) {
    more = false;
    for (const auto& [f, l] : follow)
      if (stopped_[l] && !stopped_[f]) stopped_[f] = 1, more = true;
  }
  groups_.clear();
  leadOf_.clear();
  groupOf_.assign(n, -1);
  for (size_t k = 0; k < n; ++k) {
    if (stopped_[k] || (anyFollow_ && leaderOf_[k] != -1)) continue;
    int& shared = groupOfPath_[path[k]];
    if (cap[k] == kInf && shared >= 0) {
      groups_[shared].count += count[k];
      groupOf_[k] = shared;
      continue;
    }
    groupOf_[k] = static_cast<int>(groups_.size());
    if (cap[k] == kInf) shared = groupOf_[k];
    groups_.push_back(Group{path[k], count[k], cap[k]});
  }
  if (!anyFollow_) return;
  // Followers over one path without a cap that follow one group rise and
  // stop together: one group (a follower of several is a group alone).
  // Leaders first: a chain of forwards takes a pass per link of it.
  for (bool more = true; more;) {
    more = false;
    for (const auto& [f, l] : follow) {
      if (stopped_[f] || groupOf_[f] >= 0 || groupOf_[l] < 0) continue;
      more = true;
      const int lead = leaderOf_[f] >= 0 ? groupOf_[l] : -1;
      int& last = followGroupOfPath_[path[f]];  // the path's last followers' group
      if (lead >= 0 && cap[f] == kInf && last >= 0 && leadOf_[last] == lead) {
        groups_[last].count += count[f];
        groupOf_[f] = last;
        continue;
      }
      groupOf_[f] = static_cast<int>(groups_.size());
      groups_.push_back(Group{path[f], count[f], cap[f]});
      leadOf_.resize(groups_.size(), -1);
      if (lead >= 0 && cap[f] == kInf) last = groupOf_[f], leadOf_[last] = lead;
    }
  }
  for (const auto& [f, l] : follow) followGroupOfPath_[path[f]] = -1;
  if (followers_.size() < groups_.size()) followers_.resize(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) followers_[gi].clear();
  for (const auto& [f, l] : follow) {
    const int fg = groupOf_[f], lg = groupOf_[l];
    if (fg < 0) continue;
    std::vector<int>& list = followers_[lg];
    if (std::find(list.begin(), list.end(), fg) == list.end()) list.push_back(fg);
  }
}

/// The links the groups cross, with their whole capacity left.
void FairFill::openLinks() {
  usedLinks_.clear();
  capped_.clear();
  for (int gi = 0; gi < static_cast<int>(groups_.size()); ++gi) {
    const Group& g = groups_[gi];
    groupOfPath_[g.path] = -1;
    if (g.cap < kInf) capped_.push_back(gi);
    for (int l : linksOf(g.path)) {
      if (!linkListed_[l]) {
        linkListed_[l] = 1;
        usedLinks_.push_back(l);
        linkRem_[l] = linkBps_[l], linkUsers_[l] = 0;
      }
      linkUsers_[l] += g.count, linkGroups_[l].push_back(gi);
    }
  }
}

/// Freezes group gi at `level`, and the groups that follow it.
void FairFill::freezeAt(int gi, double level, size_t& left) {
  Group& g = groups_[gi];
  if (g.frozen) return;
  g.frozen = true;
  --left;
  g.rate = level;
  for (int l : linksOf(g.path)) linkRem_[l] -= level * g.count, linkUsers_[l] -= g.count;
  if (anyFollow_)
    for (int f : followers_[gi]) freezeAt(f, level, left);
}

/// Raises the level until every group is frozen.
void FairFill::raise() {
  size_t left = groups_.size();
  double level = 0;
  auto freeze = [&](int gi) { freezeAt(gi, level, left); };
  // The links some unfrozen group still crosses, in usedLinks_ order (a
  // link all of whose groups froze leaves for good).
  openLinks_ = usedLinks_;
  while (left > 0) {
    double next = kInf;
    size_t open = 0;
    for (int l : openLinks_) {
      if (linkUsers_[l] <= 0) continue;
      next = std::min(next, linkRem_[l] / linkUsers_[l]);
      openLinks_[open++] = l;
    }
    openLinks_.resize(open);
    for (int gi : capped_)
      if (!groups_[gi].frozen) next = std::min(next, groups_[gi].cap);
    if (!(next < kInf)) {  // what is left crosses no link and has no cap
      for (Group& g : groups_)
        if (!g.frozen) g.rate = kInf;
      return;
    }
    level = std::max(level, next);
    for (int gi : capped_)
      if (!groups_[gi].frozen && groups_[gi].cap <= level * (1 + 1e-12)) freeze(gi);
    for (int l : openLinks_) {
      if (linkUsers_[l] <= 0) continue;
      if (linkRem_[l] - linkUsers_[l] * level > linkBps_[l] * 1e-12) continue;
      for (int gi : linkGroups_[l]) freeze(gi);
    }
  }
}

}  // namespace grove::plan
