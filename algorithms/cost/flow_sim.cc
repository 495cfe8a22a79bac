// Flow-level (fluid) simulation of every rank's program; see flow_sim.h.
//
// How it works:
//
// Matching. Every step that sends is paired with the step of its peer that
// receives the same bytes: on each directed connection (src, dst, channel)
// the k-th sending step of src meets the k-th receiving step of dst (phases
// in order, then lane order; a phase touches a connection from one lane per
// end, as the validator checks). A pair is a transfer: `bytes` over the
// route the sender's program planned for that connection (Program::routes),
// else net.route(src, dst). Empty steps have no transfer. A fan-out step
// (several destinations) sends one transfer per destination: they flow
// concurrently and independently, each capped by the step's input if it
// forwards, and the step ends when the last of them is released (below). A fan-in
// step (several sources) receives one transfer per source, likewise
// concurrent; a forward never sends more than its slowest input has
// delivered, and a step that only receives ends once all have arrived.
//
// Copies. A part of the call that repeats another exactly on channels of
// its own (a tree's parts, a ring's channels over the same ring) runs once,
// counted as that many streams where it shares links (mergeCopies).
//
// Steps. Each rank runs its phases in order; a phase starts all its lanes at
// once and ends when the last lane ends; a lane starts its next step when the
// previous one ends. When a step that sends starts, its transfer begins to
// flow after a delay (the route's latency + SimParams::stepOverheadUs); a
// forward's delay counts from the later of its start and the arrival of its
// input's first byte, so latencies add up along a chain. A sending step ends
// when its transfers are released: their last byte has left the sender, i.e.
// what has not arrived yet is in flight (the route's latency times the
// rate) and, for a forward, its inputs have all arrived. The next step then
// starts while those bytes travel, as the executor's buffered sends do, so a
// lane of steps pays the route's latency once, not per step (only the
// per-step overhead is paid each time). A step that only
// receives ends when it has started and its incoming transfer has arrived
// (bytes may arrive before it starts: the connection buffers them). Local
// steps take bytes / SimParams::localGBps (or nothing).
//
// Rates. Between two events the rates are constant. The transfers flowing share
// every link max-min fairly (progressive filling, fair_fill.h). A forwarding
// step (receives and sends) never sends bytes it has not received: while its
// outgoing transfer has caught up with an incoming one (a fan-in forward: any
// of them), it goes no faster than that input, which the filling keeps as it
// fills (the forward stops rising when its input does). The rates are a
// function of which transfers flow and which inputs each forward has caught up
// with: an event that changes neither (a release, a start still delayed: three
// events in five of a tree pipeline) keeps them. A link of unbounded capacity
// (a rank's port no other rank shares) takes no part.
//
// Events. The next event is the earliest of: a delayed transfer starting to
// flow (they wait in a heap by that time), a transfer's last byte leaving its
// sender (release: what is left equals rate * the route's latency, a forward's
// inputs all arrived), a transfer finishing, a forward catching up with its
// input, a local step ending. Time jumps there, every transfer advances by rate
// * dt, and released or finished transfers end their steps, which start the
// next steps at the time the release happened (events closer than a nanosecond
// merge, so a transfer may end up to 1 ns late; with SimParams::mergeShare
// time jumps past the next event to the latest event that leaves every
// transfer late by at most that share of its own duration, and every event
// in between is taken there). If nothing is flowing or
// pending while a rank is unfinished, the programs stall.
#include "algorithms/cost/flow_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <span>

#include "algorithms/cost/fair_fill.h"
#include "algorithms/cost/flow_graph.h"
#include "base/error.h"
#include "ir/step_traits.h"

namespace grove::plan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Shortest time step: events closer than this merge (transfers whose shares
// differ by a few bytes would otherwise each cost an event).
constexpr double kMinDt = 1e-9;

/// Bytes within which a transfer counts as finished / caught up.
double tolerance(double bytes) { return std::max(1e-9 * bytes, 1e-6); }

using flow::FlowGraph;
using flow::SimStep;
using flow::Transfer;

/// The transfer graph, once the network is checked.
FlowGraph checked(const FlowNet& net, const std::vector<Program>& progs, const SimParams& p) {
  if (net.capGBps.size() != net.latencyUs.size())
    throwInvalidArgument("simulate: link capacity and latency lists differ in length");
  for (double c : net.capGBps)
    if (!(c > 0)) throwInvalidArgument("simulate: every link needs a positive capacity");
  return flow::buildFlowGraph(net, progs, p);
}

class FlowSim {
 public:
  FlowSim(const FlowNet& net, const std::vector<Program>& progs, const SimParams& p)
      : net_(net),
        progs_(progs),
        p_(p),
        nranks_(static_cast<int>(progs.size())),
        g_(checked(net, progs, p)) {
    lags_.assign(g_.ups.size(), 0);
    placeInFlow_.assign(g_.xfers.size(), -1);
    std::vector<double> linkBps;
    for (double c : net.capGBps) linkBps.push_back(c * 1e9);
    fair_ = FairFill(std::move(linkBps), g_.paths);
    if (p_.mergeShare > 0) {
      fastest_.assign(g_.xfers.size(), 0);
      for (size_t x = 0; x < g_.xfers.size(); ++x) {
        double bps = kInf;
        for (int l : g_.paths[g_.pathOf[x]]) bps = std::min(bps, net.capGBps[l] * 1e9);
        fastest_[x] = g_.xfers[x].bytes / bps;
      }
    }
  }

  FlowSimResult run() {
    FlowSimResult res;
    res.linkBytes.assign(net_.capGBps.size(), 0);
    for (size_t x = 0; x < g_.xfers.size(); ++x) {
      if (g_.copies[x] == 0) continue;  // merged into another copy
      for (int l : g_.routes[g_.xfers[x].route])
        res.linkBytes[l] += g_.xfers[x].bytes * g_.copies[x];
      res.transfers += g_.copies[x];
    }
    finish_.assign(nranks_, -1);
    phase_.assign(nranks_, 0);
    lanesLeft_.assign(nranks_, 0);
    phaseEnd_.assign(nranks_, 0);
    for (int r = 0; r < nranks_; ++r) startPhase(r, 0);
    drainReady();
    while (unfinished_ > 0) {
      computeRates();
      ++res.events;
      const double dt = nextEventDt();
      if (dt == kInf) throwInvalidArgument("simulate: the programs stall:\n" + stuckText());
      advance(dt);
      now_ += dt;
      settle();
      drainReady();
    }
    res.rankSeconds = finish_;
    for (int r = 0; r < nranks_; ++r)
      if (res.criticalRank < 0 || finish_[r] >= res.seconds)
        res.seconds = finish_[r], res.criticalRank = r;
    return res;
  }

 private:
  // ---------------------------------------------------------------- steps

  /// Starts rank r's next non-empty phase at time `at` (or finishes the rank).
  void startPhase(int r, double at) {
    while (phase_[r] < g_.laneStart[r].size()) {
      const auto& lanes = g_.laneStart[r][phase_[r]];
      int nonEmpty = 0;
      for (size_t l = 0; l < lanes.size(); ++l) {
        const int end = l + 1 < lanes.size() ? lanes[l + 1] : g_.phaseEnd(progs_, r, phase_[r]);
        if (lanes[l] < end && !g_.steps[lanes[l]].merged)
          ready_.push_back({lanes[l], at}), ++nonEmpty;
      }
      if (nonEmpty > 0) {
        lanesLeft_[r] = nonEmpty;
        ++unfinished_;
        return;
      }
      ++phase_[r];
    }
    finish_[r] = at;
  }

  void drainReady() {
    while (!ready_.empty()) {
      const auto [id, at] = ready_.back();
      ready_.pop_back();
      startStep(id, at);
    }
  }

  /// Starts step id at time `at` (<= now when the previous step ended while
  /// the event loop was already past it: a release found late).
  void startStep(int id, double at) {
    SimStep& s = g_.steps[id];
    s.started = true;
    s.startedAt = at;
    const StepKind k = s.step->kind;
    if (s.step->bytes == 0 || stepIsLocal(k)) {
      if (s.step->bytes > 0 && p_.localGBps > 0) {
        s.localEnd = at + static_cast<double>(s.step->bytes) / (p_.localGBps * 1e9);
        timedLocal_.push_back(id);
      } else {
        endStep(id, at);
      }
      return;
    }
    if (!s.outs.empty()) {
      for (int x : s.outs) schedule(x);
    } else if (s.insLeft == 0) {
      endStep(id, std::max(at, s.lastArrival));
    }
  }

  /// Fixes when transfer x (whose sender has started) begins to flow: its
  /// delay after the sender starts, and for a forward not before each input's
  /// first byte arrives; then does the same for the transfers forwarding x.
  void schedule(int x) {
    Transfer& t = g_.xfers[x];
    double ready = g_.steps[t.sender].startedAt;
    for (int up : upstreamsOf(t)) {
      const Transfer& u = g_.xfers[up];
      if (u.done) continue;
      if (u.activeAt == kInf) return;  // scheduled when its inputs are
      ready = std::max(ready, u.activeAt);
    }
    t.activeAt = std::max(ready + t.delay, now_);
    pending_.push({t.activeAt, x});
    for (int down : g_.steps[t.receiver].outs)
      if (g_.steps[g_.xfers[down].sender].started && g_.xfers[down].activeAt == kInf)
        schedule(down);
  }

  /// Step id ended at time `at`: its lane goes on, or its phase may end.
  void endStep(int id, double at) {
    SimStep& s = g_.steps[id];
    s.ended = true;
    if (id + 1 < s.laneEnd) {
      ready_.push_back({id + 1, at});
      return;
    }
    const int r = s.rank;
    phaseEnd_[r] = std::max(phaseEnd_[r], at);
    if (--lanesLeft_[r] > 0) return;
    --unfinished_;
    ++phase_[r];
    startPhase(r, phaseEnd_[r]);
  }

  /// The sender has sent transfer x's last byte: once all its transfers are
  /// released, the sending step ends and the next one may start while these
  /// bytes are still in flight.
  void release(int x, double at) {
    Transfer& t = g_.xfers[x];
    if (t.released) return;
    t.released = true;
    SimStep& snd = g_.steps[t.sender];
    snd.releasedAt = std::max({snd.releasedAt, snd.startedAt, at});
    if (--snd.outsLeft == 0) endStep(t.sender, snd.releasedAt);
  }

  /// When flowing transfer x's last byte left its sender, given that what is
  /// left arrives within `left` seconds: the arrival end minus the flight,
  /// not before its first byte left nor before a forward's inputs arrived.
  double releaseTime(const Transfer& t, double left) const {
    double at = std::max(now_ + left, t.activeAt) - t.flight;
    for (int up : upstreamsOf(t)) at = std::max(at, std::min(g_.xfers[up].doneAt, now_));
    return at;
  }

  /// Whether all of a forward's inputs have arrived (true for a plain send).
  bool inputsArrived(const Transfer& t) const { return t.upstreamsLeft == 0; }

  /// Whether flowing transfer t's sender has sent everything: what has not
  /// arrived is in flight (at most rate * flight), and a forward has all of
  /// its input.
  bool sentAll(const Transfer& t) const {
    return inputsArrived(t) && t.rate > 0 &&
           t.bytes - t.sent <= t.rate * t.flight + tolerance(t.bytes);
  }

  void endTransfer(int x) {
    Transfer& t = g_.xfers[x];
    t.done = true;
    t.doneAt = now_;
    for (int down : g_.steps[t.receiver].outs) --g_.xfers[down].upstreamsLeft;
    release(x, releaseTime(t, 0));
    t.sent = t.bytes;
    t.rate = 0;
    SimStep& rcv = g_.steps[t.receiver];
    rcv.lastArrival = std::max(rcv.lastArrival, now_);
    if (--rcv.insLeft == 0 && rcv.outs.empty() && rcv.started)
      endStep(t.receiver, std::max(now_, rcv.startedAt));
  }

  // ---------------------------------------------------------------- rates

  bool flowing(const Transfer& t) const { return !t.done && t.activeAt <= now_; }

  std::span<const int> upstreamsOf(const Transfer& t) const {
    return {g_.ups.data() + t.upBegin, g_.ups.data() + t.upEnd};
  }

  /// True if forward t has caught up with its input i (an index into g_.ups),
  /// so that input caps it.
  bool caughtUpWith(const Transfer& t, int i) const {
    const Transfer& u = g_.xfers[g_.ups[i]];
    return !u.done && u.sent - t.sent <= tolerance(t.bytes) + lags_[i];
  }

  void computeRates() {
    // Transfers whose first byte leaves now join the flowing set.
    while (!pending_.empty() && pending_.top().first <= now_) {
      flow_.push_back(pending_.top().second);
      pending_.pop();
      flowChanged_ = true;
    }
    // A forward trails its input by the bytes that arrive during its own
    // start delay; within that lag it streams at the input's rate. The lags
    // change with the rates (a filling) and with the flowing set.
    if (lagsStale_ || flowChanged_) {
      for (int x : flow_) {
        const Transfer& t = g_.xfers[x];
        for (int i = t.upBegin; i < t.upEnd; ++i) lags_[i] = t.delay * g_.xfers[g_.ups[i]].rate;
      }
      lagsStale_ = false;
    }
    caught_.clear();
    for (int x : flow_) {
      const Transfer& t = g_.xfers[x];
      for (int i = t.upBegin; i < t.upEnd; ++i) caught_.push_back(caughtUpWith(t, i));
    }
    // The rates are a function of the transfers flowing (in order) and of
    // which inputs each forward has caught up with: when neither changed
    // since the last event (a release, a start still delayed), they stand.
    // A forward that falls behind an input it ran slower than changes no
    // rate either (that input did not hold it back).
    if (!flowChanged_ && !caughtMatters()) {
      lastCaught_ = caught_;
      return;
    }
    flowChanged_ = false;
    lastCaught_ = caught_;
    fill();
  }

  /// Whether a forward caught up with an input since the last filling, or
  /// fell behind one that may have held it back (it ran as fast).
  bool caughtMatters() const {
    if (caught_ == lastCaught_) return false;
    size_t c = 0;
    for (int x : flow_) {
      const Transfer& t = g_.xfers[x];
      for (int up : upstreamsOf(t)) {
        const bool now = caught_[c], before = lastCaught_[c];
        ++c;
        if (now == before) continue;
        if (now || !(t.rate < g_.xfers[up].rate * (1 - 1e-9))) return true;
      }
    }
    return false;
  }

  /// The flowing transfers' max-min fair rates, each forward no faster than
  /// the inputs it has caught up with (stopped while one of them does not
  /// flow yet).
  void fill() {
    fillPath_.clear();
    fillCount_.clear();
    fillCap_.clear();
    fillFollow_.clear();
    for (size_t k = 0; k < flow_.size(); ++k) placeInFlow_[flow_[k]] = static_cast<int>(k);
    size_t c = 0;  // caught_[c]: the next forward's input
    for (size_t k = 0; k < flow_.size(); ++k) {
      const Transfer& t = g_.xfers[flow_[k]];
      double cap = kInf;
      for (int up : upstreamsOf(t)) {
        if (!caught_[c++]) continue;
        if (flowing(g_.xfers[up]))
          fillFollow_.emplace_back(static_cast<int>(k), placeInFlow_[up]);
        else
          cap = 0;
      }
      fillPath_.push_back(g_.pathOf[flow_[k]]);
      fillCount_.push_back(g_.copies[flow_[k]]);
      fillCap_.push_back(cap);
    }
    fillRate_.resize(flow_.size());
    fair_.rates(fillPath_, fillCount_, fillCap_, fillFollow_, fillRate_);
    for (size_t k = 0; k < flow_.size(); ++k) g_.xfers[flow_[k]].rate = fillRate_[k];
    lagsStale_ = true;
  }

  /// How far time jumps to the next event: the earliest one, or with
  /// SimParams::mergeShare the latest of the events no later than every
  /// transfer's own next event plus that share of its duration (at its rate;
  /// one not flowing yet, at its path's speed; a local step's end waits for
  /// none), so that each event it takes is late by at most that share of
  /// its own transfer's time.
  double nextEventDt() const {
    double dt = pending_.empty() ? kInf : pending_.top().first - now_;
    double bound = kInf;  // the latest time an event may be taken at
    const double share = p_.mergeShare;
    if (share > 0) {
      eventDt_.clear();
      for (const auto& [at, x] : pending_.items()) {  // a start: as late as its fastest time allows
        eventDt_.push_back(at - now_);
        bound = std::min(bound, at - now_ + share * fastest_[x]);
      }
    }
    size_t c = 0;  // caught_[c]: the next forward's input (computeRates)
    for (int x : flow_) {
      const Transfer& t = g_.xfers[x];
      double next = kInf;
      if (t.rate > 0) next = std::min(next, (t.bytes - t.sent) / t.rate);
      if (t.rate > 0 && !t.released &&
          inputsArrived(t))  // (a forward's release waits for its inputs' ends)
        next = std::min(next, std::max(0.0, (t.bytes - t.sent) / t.rate - t.flight));
      for (int i = t.upBegin; i < t.upEnd; ++i) {
        if (caught_[c++]) continue;
        const Transfer& u = g_.xfers[g_.ups[i]];
        const double gap = u.sent - t.sent - lags_[i];
        if (!u.done && t.rate > u.rate)
          next = std::min(next, std::max(gap, 0.0) / (t.rate - u.rate));
      }
      dt = std::min(dt, next);
      if (share > 0 && next < kInf) {
        eventDt_.push_back(next);
        bound = std::min(bound, next + share * t.bytes / t.rate);
      }
    }
    for (int id : timedLocal_) {
      dt = std::min(dt, g_.steps[id].localEnd - now_);
      bound = std::min(bound, g_.steps[id].localEnd - now_);
    }
    if (share > 0 && dt < kInf) {
      double last = dt;
      for (double e : eventDt_)
        if (e <= bound) last = std::max(last, e);
      dt = last;
    }
    return std::max(dt, kMinDt);
  }

  void advance(double dt) {
    for (int x : flow_) g_.xfers[x].sent += g_.xfers[x].rate * dt;
    for (int x : flow_) {
      Transfer& t = g_.xfers[x];
      for (int up : upstreamsOf(t))
        if (!g_.xfers[up].done) t.sent = std::min(t.sent, g_.xfers[up].sent);
      t.sent = std::min(t.sent, t.bytes);
    }
  }

  void settle() {
    size_t keep = 0;
    for (size_t i = 0; i < flow_.size(); ++i) {
      const int x = flow_[i];
      const Transfer& t = g_.xfers[x];
      if (t.bytes - t.sent <= tolerance(t.bytes)) {
        endTransfer(x);
        continue;
      }
      if (!t.released && sentAll(t)) release(x, releaseTime(t, (t.bytes - t.sent) / t.rate));
      flow_[keep++] = x;
    }
    if (keep < flow_.size()) flowChanged_ = true;
    flow_.resize(keep);
    keep = 0;
    for (size_t i = 0; i < timedLocal_.size(); ++i) {
      const int id = timedLocal_[i];
      if (g_.steps[id].localEnd <= now_ * (1 + 1e-12)) {
        endStep(id, g_.steps[id].localEnd);
      } else {
        timedLocal_[keep++] = id;
      }
    }
    timedLocal_.resize(keep);
  }

  std::string stuckText() const {
    std::string out;
    int shown = 0;
    for (const SimStep& s : g_.steps) {
      if (!s.started || s.ended || shown >= 16) continue;
      out += "  rank " + std::to_string(s.rank) + " phase " + std::to_string(phase_[s.rank]) +
             " waits in " + describe(*s.step) + "\n";
      ++shown;
    }
    return out;
  }

  const FlowNet& net_;
  const std::vector<Program>& progs_;
  const SimParams& p_;
  const int nranks_;
  double now_ = 0;
  FlowGraph g_;
  std::vector<double> lags_;  ///< by g_.ups entry: the lag a forward may trail that input by
  std::vector<size_t> phase_;
  std::vector<int> lanesLeft_;
  std::vector<double> finish_;
  int unfinished_ = 0;
  std::vector<double> phaseEnd_;               ///< by rank: latest end of a lane of its phase
  std::vector<std::pair<int, double>> ready_;  ///< steps to start, with their start time
  /// Scheduled transfers not flowing yet, earliest first: (first byte's time, id).
  struct Pending : std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>,
                                       std::greater<>> {
    const std::vector<std::pair<double, int>>& items() const { return c; }  ///< in no order
  };
  Pending pending_;
  std::vector<double> fastest_;  ///< mergeShare: by transfer, its time alone at its path's speed
  std::vector<int> flow_;        ///< the transfers flowing (started, not done)
  bool flowChanged_ = true;      ///< flow_ changed since the last filling
  bool lagsStale_ = true;        ///< the rates changed since lags_ were worked out
  std::vector<int> timedLocal_;
  std::vector<char> caught_;             ///< computeRates(): by flow, by input: caught up
  mutable std::vector<double> eventDt_;  ///< nextEventDt(): each flowing transfer's next event
  std::vector<char> lastCaught_;         ///< and at the last filling
  FairFill fair_;
  std::vector<int> fillPath_, fillCount_;
  std::vector<std::pair<int, int>> fillFollow_;  ///< fill(): (forward, input) by place in flow_
  std::vector<int> placeInFlow_;            ///< by transfer: its place in flow_ at the last fill
  std::vector<double> fillCap_, fillRate_;  ///< fill(): by flow, for fair_
};

}  // namespace

FlowSimResult simulate(const FlowNet& net, const std::vector<Program>& programs,
                       const SimParams& p) {
  if (programs.empty()) throwInvalidArgument("simulate: no programs");
  if (!(p.stepOverheadUs >= 0) || !(p.localGBps >= 0) || !(p.mergeShare >= 0))
    throwInvalidArgument("simulate: step overhead, local speed and merge window must be >= 0");
  return FlowSim(net, programs, p).run();
}

}  // namespace grove::plan
