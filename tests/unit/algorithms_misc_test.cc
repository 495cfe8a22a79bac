// Send/recv groups, the validator and simulator on broken programs, the
// selector (thresholds, overrides, fallback) and the program cache.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "algorithms/algorithm_table.h"
#include "algorithms/builders.h"
#include "algorithms/program_cache.h"
#include "algorithms/selector.h"
#include "algorithms/validate.h"
#include "algorithms_interp.h"
#include "base/config.h"
#include "base/error.h"

namespace grove::plan {
namespace {

// ------------------------------------------------------------------ p2p

/// A random group: `pairs` transfers (src, dst, bytes), each rank issuing its
/// ops in the global order (so pairs match in call order).
struct Transfer {
  int src, dst;
  uint64_t bytes;
};

void checkGroup(int n, const std::vector<Transfer>& ts, const P2PSplit& split = {}) {
  std::vector<std::vector<P2POp>> ops(n);
  std::vector<testing::RankMemory> mem(n);
  std::vector<std::vector<uint8_t>> expect(n);
  for (size_t t = 0; t < ts.size(); ++t) {
    const Transfer& x = ts[t];
    auto addBuf = [&](int r, bool isSend) {
      mem[r].extra.emplace_back(x.bytes, isSend ? static_cast<uint8_t>(t * 7 + 1) : 0);
      return BufRef{Buf::kExtra, static_cast<uint32_t>(mem[r].extra.size() - 1), 0};
    };
    ops[x.src].push_back(P2POp{true, x.dst, x.bytes, addBuf(x.src, true)});
    ops[x.dst].push_back(P2POp{false, x.src, x.bytes, addBuf(x.dst, false)});
  }
  std::vector<Program> progs;
  ValidateOptions vo;
  for (int r = 0; r < n; ++r) {
    progs.push_back(buildP2P(ops[r], r, n, split));
    BufferSizes sz;
    for (auto& e : mem[r].extra) sz.extra.push_back(e.size());
    vo.sizes.push_back(sz);
  }
  ASSERT_NO_THROW(validatePrograms(progs, vo));
  for (const Program& p : progs)
    for (const Phase& ph : p.phases)
      for (const Lane& l : ph.lanes)
        for (const Step& s : l.steps)
          if (s.kind != StepKind::kCopy) {
            EXPECT_GE(s.channel, kP2PChannel);
            EXPECT_LT(s.channel, kP2PChannel + std::max(1, split.maxChannels));
          }
  SimOptions so;
  so.linkCapacity = 64;
  SimResult res = simulatePrograms(progs, so);
  ASSERT_TRUE(res.completed) << res.problem;
  testing::Interpreter(progs, mem, 1, false).run();
  // Every receive buffer holds the matching send's pattern.
  std::vector<size_t> next(n, 0);
  for (size_t t = 0; t < ts.size(); ++t) {
    const Transfer& x = ts[t];
    // the receive buffer is the dst rank's extra buffer created for transfer t
    size_t idx = 0;
    for (size_t u = 0; u <= t; ++u) idx += (ts[u].src == x.dst) + (ts[u].dst == x.dst);
    const auto& buf = mem[x.dst].extra[idx - 1];
    for (uint8_t b : buf) ASSERT_EQ(b, static_cast<uint8_t>(t * 7 + 1)) << "transfer " << t;
  }
}

TEST(P2P, RandomGroupsMatchInCallOrder) {
  std::mt19937 rng(42);
  for (int iter = 0; iter < 200; ++iter) {
    const int n = 1 + static_cast<int>(rng() % 6);
    std::vector<Transfer> ts;
    const int count = static_cast<int>(rng() % 12);
    for (int i = 0; i < count; ++i) {
      const int s = static_cast<int>(rng() % n), d = static_cast<int>(rng() % n);
      ts.push_back({s, d, rng() % 4 == 0 ? 0 : 1 + rng() % 300});
    }
    SCOPED_TRACE("iteration " + std::to_string(iter));
    checkGroup(n, ts);
    if (HasFatalFailure()) return;
  }
}

// Long ops cut over channels (as on a GPU): still matched in call order.
TEST(P2P, LongOpsSplitOverChannels) {
  std::mt19937 rng(7);
  const P2PSplit split{4096, 4};
  for (int iter = 0; iter < 40; ++iter) {
    const int n = 2 + static_cast<int>(rng() % 3);
    std::vector<Transfer> ts;
    const int count = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < count; ++i) {
      const int s = static_cast<int>(rng() % n), d = static_cast<int>(rng() % n);
      ts.push_back({s, d, rng() % 5 == 0 ? 1 + rng() % 300 : 1 + rng() % 40000});
    }
    SCOPED_TRACE("iteration " + std::to_string(iter));
    checkGroup(n, ts, split);
    if (HasFatalFailure()) return;
  }
  // 3 MiB + 5 B to rank 1 in 4 pieces of 790528 B (the last 774149), on
  // channels 64..67; 1 MiB to rank 2 in 2; 100 B from rank 1 in one.
  const Program p = buildP2P({{true, 1, (3u << 20) + 5, {Buf::kExtra, 0, 0}},
                              {false, 1, 100, {Buf::kExtra, 1, 0}},
                              {true, 2, 1u << 20, {Buf::kExtra, 2, 0}}},
                             0, 3, P2PSplit{512u << 10, 4});
  ASSERT_EQ(p.phases.size(), 1u);
  const std::vector<Lane>& lanes = p.phases[0].lanes;
  ASSERT_EQ(lanes.size(), 7u);
  for (int j = 0; j < 4; ++j) {
    const Step& s = lanes[j].steps.at(0);
    EXPECT_EQ(s.channel, kP2PChannel + j);
    EXPECT_EQ(s.src.offset, 790528u * j);
    EXPECT_EQ(s.bytes, j < 3 ? 790528u : 774149u);
  }
  EXPECT_EQ(lanes[4].steps.at(0).kind, StepKind::kRecv);
  EXPECT_EQ(lanes[6].steps.at(0).channel, kP2PChannel + 1);
  EXPECT_EQ(lanes[6].steps.at(0).bytes, 512u << 10);
  EXPECT_THROW(buildP2P({}, 0, 2, P2PSplit{4096, kMaxP2PChannels + 1}), Error);
  // At most 64 / (2 (nranks - 1)) pieces: 8 ranks 4, 40 ranks none.
  const std::vector<P2POp> big = {{true, 1, 64u << 20, {Buf::kExtra, 0, 0}}};
  EXPECT_EQ(buildP2P(big, 0, 8, P2PSplit{512u << 10, 16}).phases[0].lanes.size(), 4u);
  EXPECT_EQ(buildP2P(big, 0, 40, P2PSplit{512u << 10, 16}).phases[0].lanes.size(), 1u);
}

TEST(P2P, SameDirectionSamePeerSharesALaneInOrder) {
  std::vector<P2POp> ops = {{true, 1, 10, {Buf::kExtra, 0, 0}},
                            {false, 1, 20, {Buf::kExtra, 1, 0}},
                            {true, 1, 30, {Buf::kExtra, 2, 0}},
                            {true, 2, 40, {Buf::kExtra, 3, 0}}};
  Program p = buildP2P(ops, 0, 3);
  ASSERT_EQ(p.phases.size(), 1u);
  ASSERT_EQ(p.phases[0].lanes.size(), 3u);
  const auto& first = p.phases[0].lanes[0].steps;
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].bytes, 10u);
  EXPECT_EQ(first[1].bytes, 30u);
}

TEST(P2P, SelfMismatchAndBadPeerAreErrors) {
  EXPECT_THROW(buildP2P({{true, 0, 8, {Buf::kExtra, 0, 0}}}, 0, 2), Error);
  EXPECT_THROW(buildP2P({{true, 0, 8, {Buf::kExtra, 0, 0}}, {false, 0, 4, {Buf::kExtra, 1, 0}}}, 0, 2),
               Error);
  EXPECT_THROW(buildP2P({{true, 2, 8, {Buf::kExtra, 0, 0}}}, 0, 2), Error);
  EXPECT_NO_THROW(buildP2P({{true, 0, 8, {Buf::kExtra, 0, 0}}, {false, 0, 8, {Buf::kExtra, 1, 0}}}, 0, 2));
}

// ------------------------------------------------------------------ validator

Step send(int peer, uint64_t bytes, int ch = 0) {
  Step s;
  s.kind = StepKind::kSend;
  s.sendPeer = peer;
  s.channel = ch;
  s.bytes = bytes;
  return s;
}

Step recv(int peer, uint64_t bytes, int ch = 0) {
  Step s;
  s.kind = StepKind::kRecv;
  s.recvPeer = peer;
  s.channel = ch;
  s.dst.buf = Buf::kOutput;
  s.bytes = bytes;
  return s;
}

Program prog(std::vector<std::vector<Step>> lanes) {
  Program p;
  Phase ph;
  for (auto& l : lanes) ph.lanes.push_back(Lane{std::move(l)});
  p.phases.push_back(std::move(ph));
  return p;
}

void expectInvalid(const std::vector<Program>& ps, const std::string& fragment,
                   const ValidateOptions& vo = {}) {
  try {
    validatePrograms(ps, vo);
    FAIL() << "expected a validation error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInternalError);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Validate, CatchesStructuralErrors) {
  expectInvalid({prog({{send(1, 16)}}), prog({{recv(0, 8)}})}, "sends 16 B");
  expectInvalid({prog({{send(1, 16), send(1, 16)}}), prog({{recv(0, 16)}})}, "no matching receive");
  expectInvalid({prog({{send(1, 16)}}), prog({{recv(0, 16), recv(0, 16)}})}, "no matching send");
  expectInvalid({prog({{send(1, 16)}, {send(1, 16)}}), prog({{recv(0, 16), recv(0, 16)}})},
                "same phase");
  expectInvalid({prog({{send(0, 16)}}), prog({})}, "itself");
  expectInvalid({prog({{send(5, 16)}}), prog({})}, "out of range");
  ValidateOptions vo;
  vo.elemSize = 4;
  expectInvalid({prog({{send(1, 6)}}), prog({{recv(0, 6)}})}, "multiple of the element size", vo);
  vo.sizes = {BufferSizes{8, 8, {}}, BufferSizes{8, 8, {}}};
  expectInvalid({prog({{send(1, 16)}}), prog({{recv(0, 16)}})}, "exceeds", vo);
  Step bad = recv(0, 8);
  bad.dst.buf = Buf::kInput;
  expectInvalid({prog({{send(1, 8)}}), prog({{bad}})}, "writes the input", vo);
  // Different channels are different links.
  expectInvalid({prog({{send(1, 16, 0)}}), prog({{recv(0, 16, 1)}})}, "channel");
  EXPECT_NO_THROW(validatePrograms({prog({{send(1, 16)}, {recv(1, 8)}}),
                                    prog({{recv(0, 16)}, {send(0, 8)}})}));
}

TEST(Simulate, FindsDeadlockAndRespectsCapacity) {
  // Both ranks send first, then receive, in one lane: fine while the link
  // holds the whole message, a deadlock once it does not.
  auto progs = std::vector<Program>{prog({{send(1, 256), recv(1, 256)}}),
                                    prog({{send(0, 256), recv(0, 256)}})};
  SimOptions so;
  so.linkCapacity = 256;
  EXPECT_TRUE(simulatePrograms(progs, so).completed);
  so.linkCapacity = 128;
  SimResult r = simulatePrograms(progs, so);
  EXPECT_FALSE(r.completed);
  EXPECT_NE(r.problem.find("deadlock"), std::string::npos) << r.problem;
  EXPECT_THROW(checkDeadlockFree(progs, so), Error);
  // Separate lanes never deadlock.
  progs = {prog({{send(1, 4096)}, {recv(1, 4096)}}), prog({{send(0, 4096)}, {recv(0, 4096)}})};
  EXPECT_TRUE(simulatePrograms(progs, so).completed);
}

TEST(Simulate, RingNeedsSlackBeyondOneChunk) {
  CollArgs a;
  a.count = 3 * 16 * 4;  // four full loops of 3 chunks of 16 floats (64 B)
  a.nranks = 3;
  PlanParams p;
  p.chunkBytes = 64;
  std::vector<Program> progs;
  for (int r = 0; r < 3; ++r) {
    a.rank = r;
    progs.push_back(buildRingAllReduce(a, p));
  }
  SimOptions so;
  so.elemSize = 4;
  so.linkCapacity = 64;  // exactly one chunk: every link full, nobody can move
  EXPECT_FALSE(simulatePrograms(progs, so).completed);
  so.linkCapacity = 80;
  EXPECT_TRUE(simulatePrograms(progs, so).completed);
}

// ------------------------------------------------------------------ selector

SelectorConfig cfg(const std::string& algo = "") {
  SelectorConfig c;
  c.algo = algo;
  return c;
}

TEST(Selector, DefaultThresholds) {
  Selector s(4, TransportKind::kShm, cfg());
  EXPECT_EQ(s.select(Coll::kAllReduce, 16 << 10).algo, Algo::kDoubling);
  EXPECT_EQ(s.select(Coll::kAllReduce, (16 << 10) + 1).algo, Algo::kRing);
  EXPECT_EQ(s.select(Coll::kBroadcast, 0).algo, Algo::kDirect);
  EXPECT_EQ(s.select(Coll::kReduce, 1 << 20).algo, Algo::kRing);
  EXPECT_EQ(s.select(Coll::kReduceScatter, 8).algo, Algo::kRing);
  EXPECT_EQ(s.select(Coll::kGather, 1 << 30).algo, Algo::kDirect);
  EXPECT_EQ(s.select(Coll::kAlltoAll, 1).algo, Algo::kDirect);
  EXPECT_EQ(s.select(Coll::kSendRecv, 1).algo, Algo::kDirect);
  CollArgs a;
  a.coll = Coll::kAllGather;
  a.nranks = 4;
  a.count = 1024;  // 4 KiB per rank, 16 KiB in all: still direct
  EXPECT_EQ(s.select(a).algo, Algo::kDirect);
  a.count = 1025;
  EXPECT_EQ(s.select(a).algo, Algo::kRing);
  EXPECT_EQ(s.params().nChannels, 1);
  EXPECT_EQ(s.params().chunkBytes, 512u << 10);
  EXPECT_EQ(Selector(4, TransportKind::kSocket, cfg()).params().nChannels, 2);
}

// On GPU lanes automatic channels grow with the message, one per 512 KiB up
// to 32; a channel count the user set stays as set, and host lanes keep theirs.
TEST(Selector, GpuLanesScaleChannelsWithTheMessage) {
  SelectorConfig c = cfg();
  c.gpuLanes = true;
  Selector gpu(2, TransportKind::kShm, c);
  EXPECT_EQ(gpu.select(Coll::kAllReduce, 8).params.nChannels, 1);
  EXPECT_EQ(gpu.select(Coll::kAllReduce, 1 << 20).params.nChannels, 2);
  EXPECT_EQ(gpu.select(Coll::kAllReduce, 4 << 20).params.nChannels, 8);
  EXPECT_EQ(gpu.select(Coll::kBroadcast, 16 << 20).params.nChannels, 32);
  EXPECT_EQ(gpu.select(Coll::kAllGather, uint64_t{1} << 30).params.nChannels, 32);
  c.nChannels = 3;
  const Selector set(2, TransportKind::kShm, c), host(2, TransportKind::kShm, cfg());
  EXPECT_EQ(set.select(Coll::kAllReduce, 1 << 30).params.nChannels, 3);
  EXPECT_EQ(host.select(Coll::kAllReduce, 1 << 30).params.nChannels, 1);
  // Exchanges: as many channels on a GPU, one on the host (even over sockets).
  EXPECT_EQ(gpu.select(Coll::kGather, 64 << 20).params.nChannels, 32);
  EXPECT_EQ(gpu.select(Coll::kAlltoAll, 2 << 20).params.nChannels, 4);
  const Selector tcp(4, TransportKind::kSocket, cfg());
  EXPECT_EQ(tcp.select(Coll::kAllGather, 64 << 20).params.nChannels, 2);
  for (Coll coll : {Coll::kGather, Coll::kScatter, Coll::kAlltoAll})
    EXPECT_EQ(tcp.select(coll, 64 << 20).params.nChannels, 1) << collName(coll);
}

// Send/recv groups split long ops only on a GPU.
TEST(Selector, P2PSplitsOnGpus) {
  SelectorConfig c = cfg();
  EXPECT_EQ(Selector(2, TransportKind::kSocket, c).p2pSplit().maxChannels, 1);
  c.gpuLanes = true;
  EXPECT_EQ(Selector(2, TransportKind::kShm, c).p2pSplit().maxChannels, kMaxP2PChannels);
  EXPECT_EQ(Selector(2, TransportKind::kShm, c).p2pSplit().bytesPerChannel, 512u << 10);
  c.nChannels = 2;
  EXPECT_EQ(Selector(2, TransportKind::kShm, c).p2pSplit().maxChannels, 2);
}

// The latency algorithm: recursive doubling where it saves messages (see
// Selector::latencyAlgo), direct elsewhere; the same threshold for both.
TEST(Selector, LatencyAlgorithmByTransportAndRanks) {
  Selector shm3(3, TransportKind::kShm, cfg());
  EXPECT_EQ(shm3.select(Coll::kAllReduce, 8).algo, Algo::kDirect);
  EXPECT_EQ(shm3.select(Coll::kAllGather, 8).algo, Algo::kDirect);
  Selector shm8(8, TransportKind::kShm, cfg());
  EXPECT_EQ(shm8.select(Coll::kAllReduce, 8).algo, Algo::kDoubling);
  EXPECT_EQ(shm8.select(Coll::kAllGather, 8).algo, Algo::kDirect);
  Selector sock3(3, TransportKind::kSocket, cfg());
  EXPECT_EQ(sock3.select(Coll::kAllReduce, 64 << 10).algo, Algo::kDoubling);
  EXPECT_EQ(sock3.select(Coll::kAllReduce, (64 << 10) + 1).algo, Algo::kRing);
  EXPECT_EQ(sock3.select(Coll::kAllGather, 8).algo, Algo::kDirect);
  Selector sock4(4, TransportKind::kSocket, cfg());
  EXPECT_EQ(sock4.select(Coll::kAllGather, 64 << 10).algo, Algo::kDoubling);
  EXPECT_EQ(sock4.select(Coll::kBroadcast, 8).algo, Algo::kRing) << "the chain pipelines";
  EXPECT_EQ(Selector(2, TransportKind::kSocket, cfg()).select(Coll::kBroadcast, 8).algo, Algo::kDirect);
  Selector sock8(8, TransportKind::kSocket, cfg());
  EXPECT_EQ(sock8.select(Coll::kBroadcast, 64 << 10).algo, Algo::kDoubling) << "the binomial tree";
  EXPECT_EQ(sock8.select(Coll::kBroadcast, (64 << 10) + 1).algo, Algo::kRing);
  EXPECT_EQ(Selector(4, TransportKind::kSocket, cfg("broadcast:^ring")).select(Coll::kBroadcast, 8).algo,
            Algo::kDoubling);
  EXPECT_EQ(shm8.select(Coll::kBroadcast, 8).algo, Algo::kDirect);
  EXPECT_EQ(Selector(4, TransportKind::kCuda, cfg()).select(Coll::kAllReduce, 8).algo, Algo::kDirect);
  // Excluding doubling leaves direct below the threshold; naming it alone keeps it at every size.
  EXPECT_EQ(Selector(4, TransportKind::kSocket, cfg("allreduce:^doubling")).select(Coll::kAllReduce, 8).algo,
            Algo::kDirect);
  EXPECT_EQ(Selector(4, TransportKind::kShm, cfg("allgather:doubling")).select(Coll::kAllGather, 1 << 30).algo,
            Algo::kDoubling);
  // Halving-doubling over sockets: a power-of-two count of at least 4 ranks, 256 KiB..16 MiB.
  EXPECT_EQ(sock4.select(Coll::kAllReduce, 256 << 10).algo, Algo::kRing);
  EXPECT_EQ(sock4.select(Coll::kAllReduce, (256 << 10) + 1).algo, Algo::kHalving);
  EXPECT_EQ(sock4.select(Coll::kAllReduce, 16 << 20).algo, Algo::kHalving);
  EXPECT_EQ(sock4.select(Coll::kAllReduce, (16 << 20) + 1).algo, Algo::kRing);
  EXPECT_EQ(sock8.select(Coll::kAllReduce, 2 << 20).algo, Algo::kHalving);
  EXPECT_EQ(Selector(2, TransportKind::kSocket, cfg()).select(Coll::kAllReduce, 2 << 20).algo,
            Algo::kRing);
  EXPECT_EQ(Selector(6, TransportKind::kSocket, cfg()).select(Coll::kAllReduce, 2 << 20).algo,
            Algo::kRing);
  EXPECT_EQ(Selector(4, TransportKind::kShm, cfg()).select(Coll::kAllReduce, 2 << 20).algo,
            Algo::kRing);
  EXPECT_EQ(Selector(4, TransportKind::kSocket, cfg("allreduce:ring,doubling"))
                .select(Coll::kAllReduce, 2 << 20).algo,
            Algo::kRing);
  EXPECT_EQ(Selector(4, TransportKind::kShm, cfg("allreduce:halving")).select(Coll::kAllReduce, 8).algo,
            Algo::kHalving);
  bool listed = false;
  for (const std::string& line : sock4.describeTable())
    listed |= line.find("allgather      doubling <= 65536 B < ring") != std::string::npos;
  EXPECT_TRUE(listed);
  bool band = false;
  for (const std::string& line : sock4.describeTable())
    band |= line.find("allreduce      doubling <= 65536 B < ring <= 262144 B < halving <= "
                      "16777216 B < ring") != std::string::npos;
  EXPECT_TRUE(band);
  bool chain = false;
  for (const std::string& line : sock4.describeTable())
    chain |= line.find("broadcast      ring") != std::string::npos;
  EXPECT_TRUE(chain);
}

// The binomial broadcast (doubling) over sockets from 256 KiB, when every
// rank runs on one host with fewer CPUs than ranks (a power of two, >= 4).
TEST(Selector, BinomialBroadcastWhenRanksOutnumberTheCpus) {
  SelectorConfig crowded = cfg();
  crowded.hostCpus = 2;
  const Selector busy4(4, TransportKind::kSocket, crowded);
  EXPECT_EQ(busy4.select(Coll::kBroadcast, (256 << 10) - 1).algo, Algo::kRing);
  EXPECT_EQ(busy4.select(Coll::kBroadcast, 256 << 10).algo, Algo::kDoubling);
  EXPECT_EQ(busy4.select(Coll::kBroadcast, uint64_t{1} << 30).algo, Algo::kDoubling);
  EXPECT_EQ(busy4.select(Coll::kAllGather, 64 << 20).algo, Algo::kRing);
  EXPECT_EQ(Selector(8, TransportKind::kSocket, crowded).select(Coll::kBroadcast, 4 << 20).algo,
            Algo::kDoubling);
  // Not: hosts unknown or several, a CPU per rank, 3 ranks, shared memory,
  // doubling excluded, GPU buffers.
  EXPECT_EQ(Selector(4, TransportKind::kSocket, cfg()).select(Coll::kBroadcast, 4 << 20).algo,
            Algo::kRing);
  EXPECT_EQ(Selector(3, TransportKind::kSocket, crowded).select(Coll::kBroadcast, 4 << 20).algo,
            Algo::kRing);
  EXPECT_EQ(Selector(4, TransportKind::kShm, crowded).select(Coll::kBroadcast, 4 << 20).algo,
            Algo::kRing);
  SelectorConfig ringOnly = cfg("broadcast:ring,direct");
  ringOnly.hostCpus = 2;
  EXPECT_EQ(Selector(4, TransportKind::kSocket, ringOnly).select(Coll::kBroadcast, 4 << 20).algo,
            Algo::kRing);
  crowded.gpuLanes = true;
  EXPECT_EQ(Selector(4, TransportKind::kSocket, crowded).select(Coll::kBroadcast, 4 << 20).algo,
            Algo::kRing);
  SelectorConfig roomy = cfg();
  roomy.hostCpus = 4;
  EXPECT_EQ(Selector(4, TransportKind::kSocket, roomy).select(Coll::kBroadcast, 4 << 20).algo,
            Algo::kRing);
  // Two ranks over sockets on one host: one channel (several hosts: two).
  SelectorConfig one = cfg();
  one.hostCpus = 2;
  const Selector pair(2, TransportKind::kSocket, one), apart(2, TransportKind::kSocket, cfg());
  EXPECT_EQ(pair.select(Coll::kAllGather, 8 << 20).params.nChannels, 1);
  EXPECT_EQ(apart.select(Coll::kAllGather, 8 << 20).params.nChannels, 2);
  EXPECT_EQ(busy4.select(Coll::kAllGather, 8 << 20).params.nChannels, 2);
  bool listed = false;
  for (const std::string& line : busy4.describeTable())
    listed |= line.find("broadcast      ring < 262144 B <= doubling") != std::string::npos;
  EXPECT_TRUE(listed);
}

TEST(Selector, Overrides) {
  Selector s(4, TransportKind::kShm, cfg(" AllReduce : Ring ; broadcast:direct;reduce:^direct "));
  EXPECT_EQ(s.select(Coll::kAllReduce, 1).algo, Algo::kRing);
  EXPECT_EQ(s.select(Coll::kBroadcast, 1u << 30).algo, Algo::kDirect);
  EXPECT_EQ(s.select(Coll::kReduce, 1).algo, Algo::kRing);
  EXPECT_EQ(s.select(Coll::kAllGather, 1).algo, Algo::kDirect);  // untouched
  Selector all(4, TransportKind::kShm, cfg("ring"));
  EXPECT_EQ(all.select(Coll::kAllGather, 1).algo, Algo::kRing);
  EXPECT_EQ(all.select(Coll::kGather, 1).algo, Algo::kDirect);  // falls back (WARN)
  Selector both(4, TransportKind::kShm, cfg("all_reduce:ring,direct"));
  EXPECT_EQ(both.select(Coll::kAllReduce, 1).algo, Algo::kDirect);
  EXPECT_EQ(both.select(Coll::kAllReduce, 1 << 20).algo, Algo::kRing);
}

TEST(Selector, UnsupportedOverrideFallsBack) {
  Selector s(4, TransportKind::kShm, cfg("reducescatter:direct"));
  EXPECT_EQ(s.select(Coll::kReduceScatter, 1).algo, Algo::kRing);
  Selector g(4, TransportKind::kShm, cfg("gather:ring"));
  EXPECT_EQ(g.select(Coll::kGather, 1).algo, Algo::kDirect);
}

void expectBadOverride(const std::string& text, const std::string& fragment) {
  try {
    Selector s(4, TransportKind::kShm, cfg(text));
    FAIL() << "expected an error for '" << text << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Selector, BadOverrideText) {
  expectBadOverride("allreduce:blink", "valid: ring, direct, tree, hier, doubling");
  expectBadOverride("allreduc:ring", "valid: allreduce, broadcast");
  expectBadOverride("allreduce:", "no algorithm");
  expectBadOverride("allreduce:ring,", "unknown algorithm ''");
  EXPECT_NO_THROW(Selector(4, TransportKind::kShm, cfg(";;")));
}

TEST(Selector, ReadsTheRegistry) {
  config::setOverride("GROVE_ALGO", "allreduce:ring");
  config::setOverride("GROVE_DIRECT_MAX_BYTES", "1K");
  config::setOverride("GROVE_BUFFSIZE", "64K");
  config::setOverride("GROVE_CHUNKSIZE", "1M");  // too big for the buffer: clamped
  config::setOverride("GROVE_NCHANNELS", "3");
  SelectorConfig c = SelectorConfig::fromRegistry();
  EXPECT_EQ(c.algo, "allreduce:ring");
  EXPECT_EQ(c.directMaxBytes, 1024u);
  Selector s(4, TransportKind::kShm, c);
  EXPECT_EQ(s.params().chunkBytes, 32u << 10);
  EXPECT_EQ(s.params().nChannels, 3);
  EXPECT_EQ(s.select(Coll::kAllReduce, 1).algo, Algo::kRing);
  EXPECT_EQ(s.select(Coll::kBroadcast, 1025).algo, Algo::kRing);
  EXPECT_EQ(SelectorConfig::fromRegistry("broadcast:ring", 2).algo, "broadcast:ring");
  EXPECT_EQ(SelectorConfig::fromRegistry("broadcast:ring", 2).nChannels, 2);
  for (const char* v : {"GROVE_ALGO", "GROVE_DIRECT_MAX_BYTES", "GROVE_BUFFSIZE", "GROVE_CHUNKSIZE",
                        "GROVE_NCHANNELS"})
    config::setOverride(v, std::nullopt);
}

TEST(Selector, DescribesItsTable) {
  Selector s(8, TransportKind::kShm, cfg("allreduce:ring"));
  std::vector<std::string> lines = s.describeTable();
  ASSERT_EQ(lines.size(), 1u + kNumColls);
  EXPECT_NE(lines[1].find("allreduce"), std::string::npos);
  EXPECT_NE(lines[1].find("override"), std::string::npos);
  EXPECT_NE(lines[2].find("direct <= 16384 B < ring"), std::string::npos) << lines[2];
  EXPECT_EQ(parseColl("ReduceScatter"), Coll::kReduceScatter);
  EXPECT_EQ(parseAlgo("DIRECT"), Algo::kDirect);
  EXPECT_EQ(parseAlgo("tree"), Algo::kTree);
  EXPECT_FALSE(parseAlgo("blink").has_value());
}

TEST(Selector, EagerOnlyOverSharedMemoryForSmallBlocks) {
  auto call = [](Coll c, uint64_t count, int nranks, groveDataType_t t = groveFloat32) {
    CollArgs a;
    a.coll = c;
    a.count = count;
    a.dtype = t;
    a.nranks = nranks;
    return a;
  };
  Selector two(2, TransportKind::kShm, cfg(""));
  EXPECT_EQ(two.eagerMaxBytes(), 8192u) << "min(8K, 16K / 1)";
  EXPECT_TRUE(two.eager(call(Coll::kAllReduce, 2048, 2)));
  EXPECT_FALSE(two.eager(call(Coll::kAllReduce, 2049, 2)));
  EXPECT_TRUE(two.eager(call(Coll::kAllGather, 1024, 2, groveFloat64)));
  EXPECT_FALSE(two.eager(call(Coll::kSendRecv, 1, 2)));
  EXPECT_FALSE(two.eager(call(Coll::kAllReduce, UINT64_MAX / 2, 2)))
      << "a huge count must not overflow into a small block";
  Selector four(4, TransportKind::kShm, cfg(""));
  EXPECT_EQ(four.eagerMaxBytes(), 5440u) << "16K / 3, down to 64 B";
  EXPECT_EQ(Selector(64, TransportKind::kShm, cfg("")).eagerMaxBytes(), 256u);
  EXPECT_EQ(Selector(1, TransportKind::kShm, cfg("")).eagerMaxBytes(), 0u) << "no peers";
  EXPECT_EQ(Selector(2, TransportKind::kSocket, cfg("")).eagerMaxBytes(), 0u);
  EXPECT_EQ(Selector(2, TransportKind::kCuda, cfg("")).eagerMaxBytes(), 0u);
  SelectorConfig off = cfg("");
  off.eager = false;
  EXPECT_EQ(Selector(2, TransportKind::kShm, off).eagerMaxBytes(), 0u);
  SelectorConfig big = cfg("");
  big.eagerMaxBytes = 1 << 20;
  EXPECT_TRUE(Selector(8, TransportKind::kShm, big).eager(call(Coll::kBroadcast, 1 << 18, 8)));
  Selector ring(2, TransportKind::kShm, cfg("allreduce:ring"));
  EXPECT_FALSE(ring.eager(call(Coll::kAllReduce, 2, 2))) << "an override names the algorithm";
  EXPECT_TRUE(ring.eager(call(Coll::kBroadcast, 2, 2)));
  std::vector<std::string> lines = ring.describeTable();
  EXPECT_EQ(lines[1].find("eager"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("eager <= 8192 B/block < direct"), std::string::npos) << lines[2];
}

// ------------------------------------------------------------------ cache

TEST(ProgramCache, HitsMissesAndEviction) {
  ProgramCache cache(2);
  CollArgs a;
  a.count = 100;
  a.nranks = 3;
  PlanParams p;
  auto first = cache.get(Algo::kRing, a, p);
  auto again = cache.get(Algo::kRing, a, p);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  auto direct = cache.get(Algo::kDirect, a, p);
  EXPECT_NE(direct.get(), first.get());
  EXPECT_EQ(direct->algo, "direct");
  a.inPlace = true;
  cache.get(Algo::kRing, a, p);  // evicts the least recently used (ring, out of place)
  EXPECT_EQ(cache.size(), 2u);
  a.inPlace = false;
  auto rebuilt = cache.get(Algo::kRing, a, p);
  EXPECT_EQ(cache.misses(), 4u);
  EXPECT_EQ(rebuilt->phases.size(), first->phases.size());
  p.chunkBytes = 64;
  cache.get(Algo::kRing, a, p);
  EXPECT_EQ(cache.misses(), 5u);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(Describe, DumpsStepsAndNames) {
  CollArgs a;
  a.count = 4;
  a.nranks = 2;
  std::string text = describe(buildRingAllReduce(a, PlanParams{}));
  EXPECT_NE(text.find("algo=ring"), std::string::npos) << text;
  EXPECT_NE(text.find("recvReduceCopySend 1->[me]->1 ch0"), std::string::npos) << text;
  EXPECT_STREQ(stepKindName(StepKind::kRecvCopySend), "recvCopySend");
  EXPECT_STREQ(collName(Coll::kAlltoAll), "alltoall");
}

}  // namespace
}  // namespace grove::plan

namespace grove::plan {
namespace {

// The algorithm table is what every reader iterates: rows in Algo order,
// names that parse back, builders only where the row says it runs.
TEST(AlgorithmTable, RowsAreConsistent) {
  const auto& table = algorithmTable();
  for (size_t i = 0; i < table.size(); ++i) {
    const AlgoInfo& a = table[i];
    EXPECT_EQ(static_cast<size_t>(a.id), i);
    EXPECT_EQ(parseAlgo(a.name), a.id) << a.name;
    EXPECT_STREQ(algoName(a.id), a.name);
    EXPECT_NE(std::string(a.description), "");
    for (int c = 0; c < kNumColls; ++c) {
      const bool runs = algoSupports(a.id, static_cast<Coll>(c));
      if (a.builders[c] != nullptr) EXPECT_TRUE(runs) << a.name << " " << collName(static_cast<Coll>(c));
      if (a.needsPlans) EXPECT_EQ(a.builders[c], nullptr) << a.name;
    }
  }
  // 16 pairs with rank-order builders (what the structural and end-to-end
  // tests run); tree and hier only through plans.
  EXPECT_EQ(builtCombos().size(), 16u);
  EXPECT_THROW(build(Algo::kTree, CollArgs{}, PlanParams{}), Error);
}

}  // namespace
}  // namespace grove::plan
