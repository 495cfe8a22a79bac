// Send/recv groups, the validator and simulator on broken programs, the
// program cache and program dumps (the selector: selector_test.cc).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/select/program_cache.h"
#include "algorithms/select/selector.h"
#include "algorithms_interp.h"
#include "base/error.h"
#include "ir/validate.h"

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
  EXPECT_THROW(
      buildP2P({{true, 0, 8, {Buf::kExtra, 0, 0}}, {false, 0, 4, {Buf::kExtra, 1, 0}}}, 0, 2),
      Error);
  EXPECT_THROW(buildP2P({{true, 2, 8, {Buf::kExtra, 0, 0}}}, 0, 2), Error);
  EXPECT_NO_THROW(
      buildP2P({{true, 0, 8, {Buf::kExtra, 0, 0}}, {false, 0, 8, {Buf::kExtra, 1, 0}}}, 0, 2));
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
  EXPECT_NO_THROW(
      validatePrograms({prog({{send(1, 16)}, {recv(1, 8)}}), prog({{recv(0, 16)}, {send(0, 8)}})}));
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
