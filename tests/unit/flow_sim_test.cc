// The flow-level simulator on small hand-built networks and programs (exact
// times), on real builders' programs, and its error cases.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "algorithms/cost/flow_sim.h"
#include "base/error.h"

namespace grove::plan {
namespace {

constexpr double kGB = 1e9;

/// A network of `links` (capacity GB/s, latency us) and explicit routes.
struct TestNet {
  FlowNet net;
  std::map<std::pair<int, int>, std::vector<int>> routes;

  int addLink(double capGBps, double latencyUs) {
    net.capGBps.push_back(capGBps);
    net.latencyUs.push_back(latencyUs);
    return static_cast<int>(net.capGBps.size()) - 1;
  }
  FlowNet finish() {
    FlowNet n = net;
    auto table = routes;
    n.route = [table](int a, int b) {
      auto it = table.find({a, b});
      return it == table.end() ? std::vector<int>{} : it->second;
    };
    return n;
  }
};

/// Every rank joined to every other by its own link (cap, latency).
FlowNet fullMesh(int n, double capGBps, double latencyUs) {
  TestNet t;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) t.routes[{a, b}] = {t.addLink(capGBps, latencyUs)};
  return t.finish();
}

Step sendStep(int peer, uint64_t bytes, int channel = 0) {
  return detail::netStep(StepKind::kSend, -1, peer, channel, {}, {}, bytes);
}

Step recvStep(int peer, uint64_t bytes, int channel = 0) {
  return detail::netStep(StepKind::kRecv, peer, -1, channel, {}, {}, bytes);
}

/// A program of one phase per entry, each phase one lane of one step.
Program phases(std::vector<Step> steps) {
  Program p;
  for (Step& s : steps) p.phases.push_back(Phase{{Lane{{s}}}});
  return p;
}

std::vector<Program> buildAll(Program (*fn)(const CollArgs&, const PlanParams&), CollArgs a,
                              const PlanParams& params) {
  std::vector<Program> progs;
  for (int r = 0; r < a.nranks; ++r) {
    a.rank = r;
    progs.push_back(fn(a, params));
  }
  return progs;
}

TEST(FlowSim, OneSendTakesBytesOverCapacityPlusLatency) {
  const FlowNet net = fullMesh(2, 10, 3);
  SimParams p;
  p.stepOverheadUs = 2;
  const uint64_t bytes = 1 << 20;
  const auto res = simulate(net, {phases({sendStep(1, bytes)}), phases({recvStep(0, bytes)})}, p);
  EXPECT_NEAR(res.seconds, bytes / (10 * kGB) + 5e-6, 1e-12);
  EXPECT_EQ(res.transfers, 1);
  EXPECT_DOUBLE_EQ(res.linkBytes[0], static_cast<double>(bytes));  // link 0 is 0->1
  EXPECT_DOUBLE_EQ(res.linkBytes[1], 0.0);
  ASSERT_EQ(res.rankSeconds.size(), 2u);
  // The sender is done when its last byte has left: the link's latency earlier.
  EXPECT_NEAR(res.rankSeconds[1] - res.rankSeconds[0], 3e-6, 1e-12);
}

TEST(FlowSim, ALaneOfSendsPaysTheLatencyOnce) {
  // 8 sends of 64 KiB in a row over a 10 GB/s link of 20 us latency: the
  // executor's buffered sends keep the link busy, so the latency adds once
  // while the per-step overhead adds per step.
  const FlowNet net = fullMesh(2, 10, 20);
  SimParams p;
  p.stepOverheadUs = 1;
  const uint64_t b = 64 << 10;
  Lane sends, recvs;
  for (int i = 0; i < 8; ++i)
    sends.steps.push_back(sendStep(1, b)), recvs.steps.push_back(recvStep(0, b));
  Program sender, receiver;
  sender.phases.push_back(Phase{{sends}});
  receiver.phases.push_back(Phase{{recvs}});
  const auto res = simulate(net, {sender, receiver}, p);
  EXPECT_NEAR(res.seconds, 8 * (b / (10 * kGB) + 1e-6) + 20e-6, 1e-9);
}

TEST(FlowSim, TwoFlowsSharingALinkTakeTwiceAsLong) {
  // 0 -> 2 and 1 -> 2 both cross the link sw -> 2; their own links are wide.
  TestNet t;
  const int a = t.addLink(100, 0), b = t.addLink(100, 0), shared = t.addLink(10, 0);
  t.routes[{0, 2}] = {a, shared};
  t.routes[{1, 2}] = {b, shared};
  const FlowNet net = t.finish();
  SimParams p;
  p.stepOverheadUs = 0;
  const uint64_t bytes = 8 << 20;
  Program sink;
  sink.phases.push_back(Phase{{Lane{{recvStep(0, bytes)}}, Lane{{recvStep(1, bytes)}}}});
  const auto both =
      simulate(net, {phases({sendStep(2, bytes)}), phases({sendStep(2, bytes)}), sink}, p);
  EXPECT_NEAR(both.seconds, 2.0 * bytes / (10 * kGB), 1e-12);
  EXPECT_DOUBLE_EQ(both.linkBytes[shared], 2.0 * bytes);

  // Alone, one flow takes half the time.
  Program sinkOne = phases({recvStep(0, bytes)});
  const auto one = simulate(net, {phases({sendStep(2, bytes)}), Program{}, sinkOne}, p);
  EXPECT_NEAR(one.seconds, bytes / (10 * kGB), 1e-12);
}

TEST(FlowSim, CopiesOnOtherChannelsShareLinksAsTheCopiesTheyAre) {
  // Three channels 0 -> 1 over one 10 GB/s link, then a fourth alone on
  // another rank pair sharing nothing. Channels 0 and 1 carry the same bytes
  // and are simulated as one part counted twice; channel 2 carries 1 KiB
  // more (beyond what copies may differ by) and runs on its own. The times
  // and the link bytes are those of every stream.
  const FlowNet net = fullMesh(2, 10, 0);
  SimParams p;
  p.stepOverheadUs = 0;
  const uint64_t b = 4 << 20, more = b + 1024;
  Program sender, receiver;
  Phase sends, recvs;
  for (int ch = 0; ch < 3; ++ch) {
    const uint64_t bytes = ch == 2 ? more : b;
    sends.lanes.push_back(Lane{{sendStep(1, bytes, ch), sendStep(1, bytes, ch)}});
    recvs.lanes.push_back(Lane{{recvStep(0, bytes, ch), recvStep(0, bytes, ch)}});
  }
  sender.phases.push_back(sends);
  receiver.phases.push_back(recvs);
  const auto res = simulate(net, {sender, receiver}, p);
  // Three streams share the link until the equal two end, then the third
  // finishes its last 2 KiB alone: every byte at the link's full speed.
  const double total = 2.0 * (2 * b + more);
  EXPECT_NEAR(res.seconds, total / (10 * kGB), 1e-12);
  EXPECT_DOUBLE_EQ(res.linkBytes[0], total);
  EXPECT_EQ(res.transfers, 6);
  // A copy that differs by an element (4 B) is still a copy: the same time
  // to within what those bytes take.
  sender.phases[0].lanes[1].steps[1].bytes = receiver.phases[0].lanes[1].steps[1].bytes = b + 4;
  const auto near = simulate(net, {sender, receiver}, p);
  EXPECT_NEAR(near.seconds, res.seconds, 4 / (10 * kGB) + 1e-12);
}

TEST(FlowSim, FollowsTheSendersPlannedRoute) {
  // 0 -> 1 directly over a wide link, or over a narrow detour the program
  // planned for channel 1 (Program::routes); channel 0 keeps the default.
  TestNet t;
  const int wide = t.addLink(10, 0), narrow = t.addLink(1, 0);
  t.routes[{0, 1}] = {wide};
  const FlowNet net = t.finish();
  SimParams p;
  p.stepOverheadUs = 0;
  const uint64_t bytes = 1000000;
  Program src = phases({sendStep(1, bytes, 0), sendStep(1, bytes, 1)});
  src.routes.push_back(LinkRoute{1, 1, true, {narrow}});
  const auto res = simulate(net, {src, phases({recvStep(0, bytes, 0), recvStep(0, bytes, 1)})}, p);
  EXPECT_NEAR(res.seconds, bytes / (10 * kGB) + bytes / (1 * kGB), 1e-12);
  EXPECT_DOUBLE_EQ(res.linkBytes[wide], static_cast<double>(bytes));
  EXPECT_DOUBLE_EQ(res.linkBytes[narrow], static_cast<double>(bytes));
}

TEST(FlowSim, UnequalFlowsShareMaxMinFairly) {
  // Flow A is limited to 2 GB/s by its own link; flow B gets the rest of the
  // shared 10 GB/s link (8 GB/s), not half of it.
  TestNet t;
  const int slow = t.addLink(2, 0), fast = t.addLink(100, 0), shared = t.addLink(10, 0);
  t.routes[{0, 2}] = {slow, shared};
  t.routes[{1, 2}] = {fast, shared};
  const FlowNet net = t.finish();
  SimParams p;
  p.stepOverheadUs = 0;
  const uint64_t bytes = 8000000;
  Program sink;
  sink.phases.push_back(Phase{{Lane{{recvStep(0, bytes / 4)}}, Lane{{recvStep(1, bytes)}}}});
  const auto res =
      simulate(net, {phases({sendStep(2, bytes / 4)}), phases({sendStep(2, bytes)}), sink}, p);
  // A: 2 MB at 2 GB/s = 1 ms; B: 8 MB at 8 GB/s = 1 ms.
  EXPECT_NEAR(res.seconds, 1e-3, 1e-12);
  EXPECT_NEAR(res.rankSeconds[0], 1e-3, 1e-12);
}

TEST(FlowSim, ChainBroadcastPipelines) {
  // 0 -> 1 -> 2 over 10 GB/s links: the chain costs about one transfer, not two.
  const FlowNet net = fullMesh(3, 10, 1);
  SimParams p;
  p.stepOverheadUs = 1;
  CollArgs a;
  a.coll = Coll::kBroadcast;
  a.count = 16 << 20;  // 64 MiB of float32
  a.nranks = 3;
  const uint64_t bytes = a.count * 4;
  const auto res = simulate(net, buildAll(buildChainBroadcast, a, PlanParams{}), p);
  const double one = bytes / (10 * kGB);
  EXPECT_NEAR(res.seconds, one + 2 * 2e-6, 1e-9);
  EXPECT_LT(res.seconds, 1.1 * one);
  EXPECT_EQ(res.criticalRank, 2);
}

TEST(FlowSim, ForwardIsCappedByASlowerInput) {
  // 0 -> 1 at 2 GB/s, 1 -> 2 at 10 GB/s: the forward runs at 2 GB/s.
  TestNet t;
  t.routes[{0, 1}] = {t.addLink(2, 0)};
  t.routes[{1, 2}] = {t.addLink(10, 0)};
  const FlowNet net = t.finish();
  SimParams p;
  p.stepOverheadUs = 0;
  CollArgs a;
  a.coll = Coll::kBroadcast;
  a.count = 1 << 20;
  a.nranks = 3;
  const auto res = simulate(net, buildAll(buildChainBroadcast, a, PlanParams{}), p);
  EXPECT_NEAR(res.seconds, (4 << 20) / (2 * kGB), 2e-9);  // events merge within 1 ns
}

TEST(FlowSim, AForwardLeavesTheLinkShareItsSlowInputCannotFill) {
  // 0 -> 1 at 1 GB/s; 1 forwards to 2 over a 10 GB/s link that 3 -> 2
  // also crosses. The forward cannot go faster than its input, so the
  // other flow takes the other 9 GB/s (and not half of the link).
  TestNet t;
  t.routes[{0, 1}] = {t.addLink(1, 0)};
  const int shared = t.addLink(10, 0);
  t.routes[{1, 2}] = {shared};
  t.routes[{3, 2}] = {shared};
  const FlowNet net = t.finish();
  SimParams p;
  p.stepOverheadUs = 0;
  const uint64_t fwdBytes = 1 << 20, otherBytes = 9 << 20;
  Program dst;
  dst.phases.push_back(Phase{{Lane{{recvStep(1, fwdBytes)}}, Lane{{recvStep(3, otherBytes)}}}});
  const auto res =
      simulate(net,
               {phases({sendStep(1, fwdBytes)}),
                phases({detail::netStep(StepKind::kRecvCopySend, 0, 2, 0, {}, {}, fwdBytes)}), dst,
                phases({sendStep(2, otherBytes)})},
               p);
  EXPECT_NEAR(res.rankSeconds[3], otherBytes / (9 * kGB), 2e-9);
  EXPECT_NEAR(res.seconds, fwdBytes / (1 * kGB), 2e-9);
}

/// A send to `peers` (the first is sendPeer, the rest fan out).
Step fanOutStep(StepKind kind, int from, std::vector<int> peers, uint64_t bytes) {
  Step s = detail::netStep(kind, from, peers[0], 0, {}, {}, bytes);
  for (size_t i = 1; i < peers.size(); ++i) s.moreSendPeers[i - 1] = peers[i];
  return s;
}

TEST(FlowSim, FanOutSendsToEveryDestinationConcurrently) {
  // 0 -> {1, 2} over two disjoint 10 GB/s links: one fan-out step takes about
  // bytes / C; two plain sends in one lane take twice as long.
  const FlowNet net = fullMesh(3, 10, 0);
  SimParams p;
  p.stepOverheadUs = 1;
  const uint64_t bytes = 64 << 20;
  const double one = bytes / (10 * kGB);
  const auto fan = simulate(net,
                            {phases({fanOutStep(StepKind::kSend, -1, {1, 2}, bytes)}),
                             phases({recvStep(0, bytes)}), phases({recvStep(0, bytes)})},
                            p);
  EXPECT_NEAR(fan.seconds, one + 1e-6, 1e-9);
  EXPECT_EQ(fan.transfers, 2);
  Program serial;
  serial.phases.push_back(Phase{{Lane{{sendStep(1, bytes), sendStep(2, bytes)}}}});
  const auto seq =
      simulate(net, {serial, phases({recvStep(0, bytes)}), phases({recvStep(0, bytes)})}, p);
  EXPECT_NEAR(seq.seconds, 2 * (one + 1e-6), 1e-9);
}

TEST(FlowSim, FanOutForwardIsCappedByItsInputAndEndsWithItsSlowestFlow) {
  // 0 -> 1 at 2 GB/s; 1 forwards to {2, 3} at 10 GB/s each: both flows run
  // at the input's 2 GB/s at once.
  TestNet t;
  t.routes[{0, 1}] = {t.addLink(2, 0)};
  t.routes[{1, 2}] = {t.addLink(10, 0)};
  t.routes[{1, 3}] = {t.addLink(10, 0)};
  const FlowNet net = t.finish();
  SimParams p;
  p.stepOverheadUs = 0;
  const uint64_t bytes = 4 << 20;
  Step fwd = fanOutStep(StepKind::kRecvCopySend, 0, {2, 3}, bytes);
  const auto res = simulate(net,
                            {phases({sendStep(1, bytes)}), phases({fwd}),
                             phases({recvStep(1, bytes)}), phases({recvStep(1, bytes)})},
                            p);
  EXPECT_NEAR(res.seconds, bytes / (2 * kGB), 2e-9);
  EXPECT_EQ(res.transfers, 3);
  // A plain fan-out send whose destinations differ in speed ends with the slower one.
  TestNet u;
  u.routes[{0, 1}] = {u.addLink(10, 0)};
  u.routes[{0, 2}] = {u.addLink(5, 0)};
  const FlowNet net2 = u.finish();
  Program root;
  root.phases.push_back(
      Phase{{Lane{{fanOutStep(StepKind::kSend, -1, {1, 2}, bytes), sendStep(1, bytes)}}}});
  const auto res2 = simulate(
      net2, {root, phases({recvStep(0, bytes), recvStep(0, bytes)}), phases({recvStep(0, bytes)})},
      p);
  EXPECT_NEAR(res2.seconds, bytes / (5 * kGB) + bytes / (10 * kGB), 2e-9);
  EXPECT_NEAR(res2.rankSeconds[2], bytes / (5 * kGB), 2e-9);
}

/// A reducing receive from `peers` (the first is recvPeer, the rest fan in), sending to `to`.
Step fanInStep(StepKind kind, std::vector<int> peers, int to, uint64_t bytes) {
  Step s = detail::netStep(kind, peers[0], to, 0, {}, {}, bytes);
  for (size_t i = 1; i < peers.size(); ++i) s.moreRecvPeers[i - 1] = peers[i];
  return s;
}

TEST(FlowSim, FanInReceivesFromEverySourceConcurrently) {
  // {1, 2} -> 0 over two disjoint 10 GB/s links: one fan-in reduction takes
  // about bytes / C; two chained reductions in one lane take twice as long.
  const FlowNet net = fullMesh(3, 10, 0);
  SimParams p;
  p.stepOverheadUs = 1;
  const uint64_t bytes = 64 << 20;
  const double one = bytes / (10 * kGB);
  const auto fan = simulate(net,
                            {phases({fanInStep(StepKind::kRecvReduce, {1, 2}, -1, bytes)}),
                             phases({sendStep(0, bytes)}), phases({sendStep(0, bytes)})},
                            p);
  EXPECT_NEAR(fan.seconds, one + 1e-6, 1e-9);
  EXPECT_EQ(fan.transfers, 2);
  Program serial;
  serial.phases.push_back(Phase{{Lane{{fanInStep(StepKind::kRecvReduce, {1}, -1, bytes),
                                       fanInStep(StepKind::kRecvReduce, {2}, -1, bytes)}}}});
  const auto seq =
      simulate(net, {serial, phases({sendStep(0, bytes)}), phases({sendStep(0, bytes)})}, p);
  // The second source's bytes wait in its connection: its step ends when it starts.
  EXPECT_NEAR(seq.seconds, one + 1e-6, 1e-9);
  EXPECT_GT(fan.rankSeconds[0], 0);
}

TEST(FlowSim, FanInForwardIsCappedByItsSlowestInput) {
  // 1 -> 0 at 2 GB/s and 2 -> 0 at 10 GB/s; 0 reduces both and forwards to 3
  // at 10 GB/s: the forward runs at the slower input's 2 GB/s.
  TestNet t;
  t.routes[{1, 0}] = {t.addLink(2, 0)};
  t.routes[{2, 0}] = {t.addLink(10, 0)};
  t.routes[{0, 3}] = {t.addLink(10, 0)};
  const FlowNet net = t.finish();
  SimParams p;
  p.stepOverheadUs = 0;
  const uint64_t bytes = 4 << 20;
  const auto res = simulate(
      net,
      {phases({fanInStep(StepKind::kRecvReduceSend, {1, 2}, 3, bytes)}),
       phases({sendStep(0, bytes)}), phases({sendStep(0, bytes)}), phases({recvStep(0, bytes)})},
      p);
  EXPECT_NEAR(res.seconds, bytes / (2 * kGB), 2e-9);
  EXPECT_EQ(res.transfers, 3);
  EXPECT_NEAR(res.rankSeconds[2], bytes / (10 * kGB), 2e-9);
}

TEST(FlowSim, PhasesAddUp) {
  const FlowNet net = fullMesh(2, 5, 1);
  SimParams p;
  p.stepOverheadUs = 1;
  const uint64_t b1 = 1 << 20, b2 = 3 << 20;
  const auto res = simulate(
      net, {phases({sendStep(1, b1), recvStep(1, b2)}), phases({recvStep(0, b1), sendStep(0, b2)})},
      p);
  EXPECT_NEAR(res.seconds, (b1 + b2) / (5 * kGB) + 2 * 2e-6, 1e-12);
}

TEST(FlowSim, LaneStepsRunInOrderAndLocalStepsCost) {
  const FlowNet net = fullMesh(2, 4, 0);
  SimParams p;
  p.stepOverheadUs = 0;
  p.localGBps = 8;
  const uint64_t b = 4 << 20;
  Step copy;
  copy.kind = StepKind::kCopy;
  copy.bytes = b;
  Program sender;
  sender.phases.push_back(Phase{{Lane{{copy, sendStep(1, b), sendStep(1, b)}}}});
  const auto res = simulate(net, {sender, phases({recvStep(0, b), recvStep(0, b)})}, p);
  EXPECT_NEAR(res.seconds, b / (8 * kGB) + 2 * b / (4 * kGB), 1e-12);
}

/// A ring all-reduce of `count` floats on n ranks over a unidirectional
/// ring net (r -> r+1 has cap(r) GB/s and 0.5 us; other pairs are
/// unreachable).
struct RingCase {
  FlowNet net;
  CollArgs args;
  std::vector<Program> progs;
};
RingCase ringAllReduce(int n, double (*cap)(int r), uint64_t count, const PlanParams& params) {
  TestNet t;
  for (int r = 0; r < n; ++r) t.routes[{r, (r + 1) % n}] = {t.addLink(cap(r), 0.5)};
  RingCase c;
  c.net = t.finish();
  c.args.coll = Coll::kAllReduce;
  c.args.count = count;
  c.args.nranks = n;
  c.progs = buildAll(buildRingAllReduce, c.args, params);
  return c;
}

TEST(FlowSim, RingAllReduceNearItsBandwidthFormula) {
  const int n = 8;
  PlanParams params;
  params.chunkBytes = 512 << 10;
  const RingCase ring = ringAllReduce(
      n, [](int) { return 20.0; }, 16 << 20, params);  // 64 MiB
  const FlowNet& net = ring.net;
  const CollArgs& a = ring.args;
  const std::vector<Program>& progs = ring.progs;
  size_t steps = 0;
  for (const Phase& ph : progs[0].phases)
    for (const Lane& l : ph.lanes) steps += l.steps.size();
  SimParams p;
  const auto t0 = std::chrono::steady_clock::now();
  const auto res = simulate(net, progs, p);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double ideal = 2.0 * (n - 1) / n * (a.count * 4) / (20 * kGB);
  EXPECT_GT(res.seconds, ideal);
  EXPECT_LT(res.seconds, 1.25 * ideal);
  std::printf(
      "ring all-reduce, %d ranks x %zu steps: %d transfers, %d events, %.2f ms to simulate; "
      "predicted %.3f ms (ideal %.3f ms)\n",
      n, steps, res.transfers, res.events, ms, res.seconds * 1e3, ideal * 1e3);
}

// SimParams::mergeShare takes events together where none is late by more
// than that share of its own transfer's time: on a ring of unequal links,
// whose chunks end out of step, fewer events and about the same time.
TEST(FlowSim, MergedEventsStayWithinTheirShare) {
  PlanParams params;
  params.chunkBytes = 256 << 10;
  params.nChannels = 2;
  const RingCase ring = ringAllReduce(
      8, [](int r) { return 20 - 1.5 * r; }, 8 << 20, params);
  const FlowNet& net = ring.net;
  const std::vector<Program>& progs = ring.progs;
  SimParams exact;
  const FlowSimResult full = simulate(net, progs, exact);
  for (double share : {0.01, 0.02, 0.05}) {
    SimParams merged = exact;
    merged.mergeShare = share;
    const FlowSimResult quick = simulate(net, progs, merged);
    std::printf("mergeShare %.2f: %d events (exact %d), %.4f ms (exact %.4f ms)\n", share,
                quick.events, full.events, quick.seconds * 1e3, full.seconds * 1e3);
    EXPECT_LT(quick.events, full.events) << share;
    EXPECT_NEAR(quick.seconds, full.seconds, share * full.seconds) << share;
    EXPECT_EQ(quick.linkBytes, full.linkBytes) << share;
  }
  SimParams bad;
  bad.mergeShare = -0.1;
  EXPECT_THROW(simulate(net, progs, bad), Error);
}

TEST(FlowSim, BadProgramsFailClearly) {
  const FlowNet net = fullMesh(2, 10, 1);
  const SimParams p;
  try {
    simulate(net, {phases({sendStep(1, 64)}), Program{}}, p);
    FAIL() << "unmatched send accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 sending steps but 0 receiving"), std::string::npos)
        << e.what();
  }
  try {
    simulate(net, {phases({sendStep(1, 64)}), phases({recvStep(0, 32)})}, p);
    FAIL() << "size mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64 B sent but 32 B received"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(simulate(net, {phases({sendStep(5, 64)}), Program{}}, p), Error);
  // Both ranks receive first: a stall.
  try {
    simulate(
        net,
        {phases({recvStep(1, 64), sendStep(1, 64)}), phases({recvStep(0, 64), sendStep(0, 64)})},
        p);
    FAIL() << "stall not found";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stall"), std::string::npos) << e.what();
  }
  TestNet noRoute;
  noRoute.addLink(1, 0);
  EXPECT_THROW(
      simulate(noRoute.finish(), {phases({sendStep(1, 64)}), phases({recvStep(0, 64)})}, p), Error);
}

}  // namespace
}  // namespace grove::plan
