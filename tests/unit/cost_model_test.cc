// The cost model: the flow-level simulator on small hand-built networks and
// programs (exact times), on real builders' programs, and its error cases;
// predictions and the per-size selection table on the machine fixtures.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/cost/cost_model.h"
#include "algorithms/cost/flow_sim.h"
#include "base/error.h"
#include "topology/topo_file.h"
#include "unit/link_presets.h"
#include "unit/topo_fixtures.h"

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
  Step s;
  s.kind = StepKind::kSend;
  s.sendPeer = peer;
  s.channel = channel;
  s.bytes = bytes;
  return s;
}

Step recvStep(int peer, uint64_t bytes, int channel = 0) {
  Step s;
  s.kind = StepKind::kRecv;
  s.recvPeer = peer;
  s.channel = channel;
  s.bytes = bytes;
  return s;
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

/// A send to `peers` (the first is sendPeer, the rest fan out).
Step fanOutStep(StepKind kind, int from, std::vector<int> peers, uint64_t bytes) {
  Step s = sendStep(peers[0], bytes);
  s.kind = kind;
  s.recvPeer = from;
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
  Step s = recvStep(peers[0], bytes);
  s.kind = kind;
  s.sendPeer = to;
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

TEST(FlowSim, RingAllReduceNearItsBandwidthFormula) {
  const int n = 8;
  // A unidirectional ring net: r -> r+1 has 20 GB/s; other pairs are unreachable.
  TestNet t;
  for (int r = 0; r < n; ++r) t.routes[{r, (r + 1) % n}] = {t.addLink(20, 0.5)};
  const FlowNet net = t.finish();
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.count = 16 << 20;  // 64 MiB
  a.nranks = n;
  PlanParams params;
  params.chunkBytes = 512 << 10;
  const auto progs = buildAll(buildRingAllReduce, a, params);
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

// ---------------------------------------------------------------- model

Selector cudaSelector(int nranks) {
  return Selector(nranks, presets::deviceRingTraits(), SelectorConfig{});
}

/// Every size maps to an allowed algorithm, rules ascend and end open.
void expectCoversAllSizes(const Selector& sel, Coll coll) {
  const std::vector<SizeRule>& rules = sel.sizeTable(coll);
  ASSERT_FALSE(rules.empty()) << collName(coll);
  EXPECT_EQ(rules.back().maxBytes, UINT64_MAX) << collName(coll);
  for (size_t i = 1; i < rules.size(); ++i) {
    EXPECT_LT(rules[i - 1].maxBytes, rules[i].maxBytes);
    EXPECT_NE(rules[i - 1].algo, rules[i].algo) << "runs of one winner must merge";
  }
  for (uint64_t b :
       {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 20, uint64_t{3} << 29, UINT64_MAX / 2}) {
    const Algo a = sel.select(coll, b).algo;
    EXPECT_TRUE(algoSupports(a, coll)) << collName(coll) << " " << b;
    EXPECT_TRUE(sel.allowedMask(coll) & (1u << static_cast<unsigned>(a)));
  }
}

TEST(CostModel, PredictionGrowsWithSizeAndMatchesASimulation) {
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 3, 4, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.nranks = 4;
  PlanParams params;
  const SimParams p;
  double last = 0;
  for (uint64_t count : {uint64_t{256}, uint64_t{1} << 16, uint64_t{1} << 22}) {
    a.count = count;
    const FlowSimResult r = predict(plans, Algo::kRing, a, params, p);
    EXPECT_GT(r.seconds, last);
    EXPECT_DOUBLE_EQ(r.seconds, predictSeconds(plans, Algo::kRing, a, params, p));
    EXPECT_GE(r.criticalRank, 0);
    last = r.seconds;
  }
  // 16 MiB all-reduce over NVLink (at most 4 x 50 GB/s out of each GPU) takes
  // longer than the bandwidth bound allows.
  EXPECT_GT(last, (16 << 20) / (allReduceBound(plans.graph()) * 1e9));
  a.nranks = 3;
  EXPECT_THROW(predictSeconds(plans, Algo::kRing, a, params, p), Error);
}

TEST(CostModel, BeyondTwoHundredFiftySixMiBTheLineThroughSixtyFourAndTwoHundredFiftySixMiB) {
  // A pipeline: a fixed fill plus a time per byte -- the line is exact.
  auto pipeline = [](uint64_t b) { return 1e-3 + static_cast<double>(b) * 1e-11; };
  const uint64_t big = 1ull << 30;
  EXPECT_NEAR(secondsBySize(big, pipeline), pipeline(big), 1e-12);
  std::vector<uint64_t> asked;
  secondsBySize(big, [&](uint64_t b) {
    asked.push_back(b);
    return pipeline(b);
  });
  EXPECT_EQ(asked, (std::vector<uint64_t>{64ull << 20, 256ull << 20}));  // the 256 MiB one last
  EXPECT_DOUBLE_EQ(secondsBySize(1 << 20, pipeline), pipeline(1 << 20));
  EXPECT_DOUBLE_EQ(secondsBySize(256ull << 20, pipeline), pipeline(256ull << 20));
  // Times that do not grow with the size: in proportion to 256 MiB's.
  EXPECT_DOUBLE_EQ(extendedSeconds(2.0, 1.0, big), 4.0);
}

TEST(CostModel, TheLineStaysNearTheDirectSimulationAt1GiB) {
  // Trees on 4 GPUs of the DGX-1: the extended 1 GiB time against the
  // simulation of every chunk (within 3 %; in proportion it was further off).
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3});
  TopoPlans plans(PlanGraph::fromTopology(t));
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.nranks = 4;
  const PlanParams params;
  const SimParams p;
  auto at = [&](uint64_t bytes) {
    a.count = bytes / 4;
    return predictSeconds(plans, Algo::kTree, a, params, p);
  };
  const uint64_t big = 1ull << 30;
  const double direct = at(big);
  const double line = secondsBySize(big, at);
  std::printf("tree all-reduce of 1 GiB on 4 GPUs: %.3f ms simulated, %.3f ms by the line\n",
              direct * 1e3, line * 1e3);
  EXPECT_NEAR(line / direct, 1.0, 0.03);
}

TEST(CostModel, SizeRulesMergeRunsAndEndOpen) {
  std::vector<TuneRow> rows(4);
  const Algo winners[] = {Algo::kDirect, Algo::kDirect, Algo::kRing, Algo::kTree};
  for (int i = 0; i < 4; ++i) rows[i].bytes = 1024ull << (2 * i), rows[i].winner = winners[i];
  const std::vector<SizeRule> rules = sizeRulesOf(rows);
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].maxBytes, 2 * 4096u);
  EXPECT_EQ(rules[0].algo, Algo::kDirect);
  EXPECT_EQ(rules[1].maxBytes, 2 * 16384u);
  EXPECT_EQ(rules[1].algo, Algo::kRing);
  EXPECT_EQ(rules[2].maxBytes, UINT64_MAX);
  EXPECT_EQ(rules[2].algo, Algo::kTree);
  EXPECT_EQ(tuneSizes().front(), 1024u);
  EXPECT_EQ(tuneSizes().back(), 1ull << 30);
}

/// Prints a tuning's predictions (algbw per algorithm) and checks each
/// winner is the fastest prediction of its row.
void printAndCheckRows(const std::vector<TuneRow>& rows) {
  ASSERT_EQ(rows.size(), tuneSizes().size());
  for (const TuneRow& r : rows) {
    std::printf("%10llu B:", static_cast<unsigned long long>(r.bytes));
    for (int a = 0; a < kNumAlgos; ++a)
      if (r.seconds[a] >= 0)
        std::printf("  %s %.1f GB/s", algoName(static_cast<Algo>(a)), r.bytes / r.seconds[a] / 1e9);
    std::printf("  -> %s\n", algoName(r.winner));
    EXPECT_GE(r.seconds[static_cast<int>(r.winner)], 0);
    // The winner is the fastest: the table never picks what it predicts slower.
    for (int a = 0; a < kNumAlgos; ++a) {
      if (r.seconds[a] < 0) continue;
      EXPECT_LE(r.seconds[static_cast<int>(r.winner)], r.seconds[a]);
    }
  }
}

TEST(CostModel, TableOnDgx1V100Gpus0347CoversAllSizes) {
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 3, 4, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  Selector sel = cudaSelector(4);
  printAndCheckRows(tuneCollective(sel, plans, Coll::kAllReduce, 4, SimParams{}));
  tuneSelector(sel, plans, 4, SimParams{});
  for (Coll c :
       {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter})
    expectCoversAllSizes(sel, c);
  // Tiny messages are latency bound: a latency algorithm (one direct step, or
  // log2(n) doubling rounds) beats any pipeline.
  const Algo tiny = sel.select(Coll::kAllReduce, 1024).algo;
  EXPECT_TRUE(tiny == Algo::kDirect || tiny == Algo::kDoubling) << algoName(tiny);
  // Large ones are bandwidth bound: never the direct all-reduce, which moves
  // (n-1) times the message out of every GPU.
  EXPECT_NE(sel.select(Coll::kAllReduce, 1ull << 30).algo, Algo::kDirect);
  EXPECT_NE(sel.select(Coll::kAllReduce, 1ull << 30).algo, Algo::kDoubling);
  for (const std::string& line : sel.describeTable()) std::printf("%s\n", line.c_str());
}

TEST(CostModel, TuneRespectsOverrides) {
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2});
  TopoPlans plans(PlanGraph::fromTopology(t));
  SelectorConfig cfg;
  cfg.algo = "allreduce:ring,tree";
  Selector sel(3, presets::deviceRingTraits(), cfg);
  tuneSelector(sel, plans, 3, SimParams{});
  for (const SizeRule& r : sel.sizeTable(Coll::kAllReduce)) EXPECT_NE(r.algo, Algo::kDirect);
  EXPECT_THROW(tuneSelector(sel, plans, 4, SimParams{}), Error);
}

TEST(CostModel, Dgx1V100AllGpusRingsVersusTrees) {
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5, 6, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  Selector sel = cudaSelector(8);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TuneRow> rows = tuneCollective(sel, plans, Coll::kAllReduce, 8, SimParams{});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printAndCheckRows(rows);
  std::printf("tuning all-reduce for 8 ranks took %.2f s (plans included)\n", s);
  const auto t1 = std::chrono::steady_clock::now();
  tuneSelector(sel, plans, 8, SimParams{});
  std::printf("tuneSelector (5 collectives, plans cached) took %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
  expectCoversAllSizes(sel, Coll::kAllReduce);
}

TEST(CostModel, TheTableAt256MiBIsTheSimulationItself) {
  // DGX-1 V100, all 8 GPUs, all-gather: at 16 and 64 MiB the forest is
  // still filling its pipelines, and the line through those two put it at
  // 256 MiB 12 % above its own simulation -- and above rings, which the
  // simulation says are faster. The 256 MiB row is each algorithm's
  // simulation, so the table picks what it predicts fastest there.
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5, 6, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  Selector sel = cudaSelector(8);
  const uint64_t big = 256ull << 20;
  const std::vector<TuneRow> rows = tuneCollective(sel, plans, Coll::kAllGather, 8, SimParams{});
  const TuneRow* row = nullptr;
  for (const TuneRow& r : rows)
    if (r.bytes == big) row = &r;
  ASSERT_NE(row, nullptr);
  const Selection base = sel.select(Coll::kAllGather, big);
  for (Algo a : {Algo::kRing, Algo::kTree}) {
    const double direct =
        predictSeconds(plans, a, argsFor(Coll::kAllGather, big, 8), base.params, SimParams{});
    EXPECT_DOUBLE_EQ(row->seconds[static_cast<int>(a)], direct) << algoName(a);
  }
  const double winner = row->seconds[static_cast<int>(row->winner)];
  for (double s : row->seconds)
    if (s >= 0) EXPECT_LE(winner, s);
}

TEST(CostModel, TheJudgeChoosesHowManyTrees) {
  // DGX-1 V100 GPUs 0-5: the fewest trees keeping 99% of the optimum are
  // not the fastest at 64 MiB; the cost model's choice is never slower than
  // the packer's rule (that set is one of its candidates) and here faster
  // (a set of its own: 10 trees against the rule's 8).
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5});
  Selector sel = cudaSelector(6);
  TopoPlans rule(PlanGraph::fromTopology(t)), judged(PlanGraph::fromTopology(t));
  const TreeJudge judge = treeJudge(judged.graph(), sel, SimParams{}, 64ull << 20);
  judged.setTreeJudge(judge);
  const TreePlan& a = rule.allReduceTrees();
  const TreePlan& b = judged.allReduceTrees();
  EXPECT_EQ(a.judged, 0);
  EXPECT_GT(b.judged, 1);
  const double ta = judge(a.trees, true, 0), tb = judge(b.trees, true, 0);
  EXPECT_LT(tb, ta * 0.95);
  EXPECT_NE(b.trees.size(), a.trees.size());
  std::printf(
      "0-5 all-reduce at 64 MiB: %zu trees (%.1f GB/s) %.3f ms, judged %zu trees (%.1f GB/s) %.3f "
      "ms\n",
      a.trees.size(), a.rate, ta * 1e3, b.trees.size(), b.rate, tb * 1e3);
  const TreePlan& c = judged.rootedTrees(0);
  EXPECT_GT(c.judged, 0);
  EXPECT_LE(judge(c.trees, false, 0), judge(rule.rootedTrees(0).trees, false, 0) * (1 + 1e-9));
}

}  // namespace
}  // namespace grove::plan
