// Builders x validator x deadlock simulation x reference interpreter: every
// collective and algorithm over rank counts, sizes, element sizes, in/out of
// place and channel counts, with small chunks so that the ring loops many times.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "algorithm_combos.h"
#include "algorithms/builders/builders.h"
#include "algorithms/select/selector.h"
#include "algorithms_interp.h"
#include "base/dtype.h"
#include "base/error.h"
#include "ir/validate.h"

namespace grove::plan {
namespace {

using testing::Interpreter;
using testing::RankMemory;

struct Case {
  Coll coll;
  Algo algo;
  int nranks;
  uint64_t count;
  groveDataType_t dtype;
  bool inPlace;
  PlanParams params;
  int root;
};

std::string caseText(const Case& c) {
  return std::string(collName(c.coll)) + "/" + algoName(c.algo) + " n=" + std::to_string(c.nranks) +
         " count=" + std::to_string(c.count) + " " + dtypeName(c.dtype) +
         (c.inPlace ? " inplace" : " outofplace") + " ch=" + std::to_string(c.params.nChannels) +
         " chunk=" + std::to_string(c.params.chunkBytes) + " root=" + std::to_string(c.root);
}

CollArgs argsOf(const Case& c, int rank) {
  CollArgs a;
  a.coll = c.coll;
  a.count = c.count;
  a.dtype = c.dtype;
  a.op = groveAvg;
  a.root = c.root;
  a.rank = rank;
  a.nranks = c.nranks;
  a.inPlace = c.inPlace;
  return a;
}

std::vector<Program> buildAll(const Case& c) {
  std::vector<Program> progs;
  for (int r = 0; r < c.nranks; ++r) progs.push_back(build(c.algo, argsOf(c, r), c.params));
  return progs;
}

/// Input value of element i on rank r; for the reducing collectives the
/// values of one index over all ranks sum to a multiple of nranks, so avg is exact.
uint64_t inputValue(int r, uint64_t i, int n) {
  if (r < n - 1) return (static_cast<uint64_t>(r) * 7 + i * 3) % 5;
  uint64_t others = 0;
  for (int q = 0; q < n - 1; ++q) others += (static_cast<uint64_t>(q) * 7 + i * 3) % 5;
  return static_cast<uint64_t>(n) + (n - others % n) % n;
}

void storeValue(uint8_t* p, uint64_t v, uint64_t es) { std::memcpy(p, &v, es); }

/// Lays out one rank's buffers (aliased as the C API defines in place).
RankMemory makeMemory(const Case& c, int r, uint64_t es) {
  const CollArgs a = argsOf(c, r);
  const BufferSizes sz = bufferSizesFor(a);
  const uint64_t b = c.count * es, all = b * c.nranks;
  RankMemory m;
  const bool root = r == c.root;
  const bool same = c.inPlace && (c.coll == Coll::kAllReduce || c.coll == Coll::kBroadcast ||
                                  c.coll == Coll::kReduce || c.coll == Coll::kAlltoAll);
  if (same) {
    m.arenaOut.assign(std::max(sz.input, sz.output), 0xCD);
    m.in = m.out = m.arenaOut.data();
  } else if (c.inPlace && (c.coll == Coll::kAllGather || (c.coll == Coll::kGather && root))) {
    m.arenaOut.assign(all, 0xCD);
    m.out = m.arenaOut.data();
    m.in = m.out + r * b;
  } else if (c.inPlace && (c.coll == Coll::kReduceScatter || (c.coll == Coll::kScatter && root))) {
    m.arenaIn.assign(all, 0xCD);
    m.in = m.arenaIn.data();
    m.out = m.in + r * b;
  } else {
    m.arenaIn.assign(sz.input + 1, 0xCD);
    m.arenaOut.assign(sz.output + 1, 0xCD);
    m.in = m.arenaIn.data();
    m.out = m.arenaOut.data();
  }
  for (uint64_t i = 0; i < sz.input / es; ++i)
    storeValue(m.in + i * es, inputValue(r, i, c.nranks), es);
  return m;
}

/// Expected value of output element i on rank r.
uint64_t expected(const Case& c, int r, uint64_t i, uint64_t es) {
  const int n = c.nranks;
  const uint64_t mask = es == 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * es)) - 1);
  auto avgAt = [&](uint64_t idx) {
    uint64_t s = 0;
    for (int q = 0; q < n; ++q) s += inputValue(q, idx, n);
    return (s / n) & mask;
  };
  switch (c.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: return avgAt(i);
    case Coll::kReduceScatter: return avgAt(r * c.count + i);
    case Coll::kBroadcast: return inputValue(c.root, i, n);
    case Coll::kAllGather:
    case Coll::kGather: return inputValue(static_cast<int>(i / c.count), i % c.count, n);
    case Coll::kScatter: return inputValue(c.root, r * c.count + i, n);
    case Coll::kAlltoAll:
      return inputValue(static_cast<int>(i / c.count), r * c.count + i % c.count, n);
    case Coll::kSendRecv: break;
  }
  return 0;
}

void interpretAndCheck(const Case& c, const std::vector<Program>& progs, uint64_t es) {
  std::vector<RankMemory> mem;
  for (int r = 0; r < c.nranks; ++r) mem.push_back(makeMemory(c, r, es));
  std::vector<std::vector<uint8_t>> inputsBefore;
  for (int r = 0; r < c.nranks; ++r) {
    const BufferSizes sz = bufferSizesFor(argsOf(c, r));
    inputsBefore.emplace_back(mem[r].in, mem[r].in + sz.input);
  }
  Interpreter(progs, mem, es, /*avg=*/true).run();
  for (int r = 0; r < c.nranks; ++r) {
    const BufferSizes sz = bufferSizesFor(argsOf(c, r));
    for (uint64_t i = 0; i < sz.output / es; ++i) {
      uint64_t got = 0;
      std::memcpy(&got, mem[r].out + i * es, es);
      ASSERT_EQ(got, expected(c, r, i, es)) << "rank " << r << " element " << i;
    }
    if (!c.inPlace) {
      ASSERT_TRUE(std::equal(inputsBefore[r].begin(), inputsBefore[r].end(), mem[r].in))
          << "rank " << r << " input modified";
    }
  }
}

void checkCase(const Case& c, bool forceInterpret = false) {
  SCOPED_TRACE(caseText(c));
  const uint64_t es = dtypeSize(c.dtype);
  const std::vector<Program> progs = buildAll(c);
  ValidateOptions vo;
  vo.elemSize = es;
  for (int r = 0; r < c.nranks; ++r) vo.sizes.push_back(bufferSizesFor(argsOf(c, r)));
  ASSERT_NO_THROW(validatePrograms(progs, vo)) << describe(progs[0]);
  SimOptions so;
  so.elemSize = es;
  so.linkCapacity = (c.params.chunkBytes + 15) / 16 * 16 + 16;  // barely more than one chunk
  SimResult res = simulatePrograms(progs, so);
  ASSERT_TRUE(res.completed) << res.problem;
  if (forceInterpret || c.count * es * c.nranks <= (64u << 10)) interpretAndCheck(c, progs, es);
}

using testing::Combo;

class BuilderTest : public ::testing::TestWithParam<Combo> {};

TEST_P(BuilderTest, ValidatesSimulatesAndComputes) {
  const Combo combo = GetParam();
  const groveDataType_t dtypes[] = {groveInt8, groveFloat16, groveFloat32, groveFloat64};
  for (int n : {1, 2, 3, 4, 5, 8}) {
    for (groveDataType_t dt : dtypes) {
      const uint64_t es = dtypeSize(dt);
      for (uint64_t count :
           {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1021}, (uint64_t{1} << 20) / es + 3}) {
        for (bool inPlace : {false, true}) {
          // in place too: all-to-all stages the leaving blocks in scratch
          for (int nch : {1, 2, 3}) {
            Case c{combo.coll, combo.algo, n, count, dt, inPlace, PlanParams{}, 0};
            c.params.nChannels = nch;
            c.params.chunkBytes = count <= 1021 ? 64 : 4096;
            c.root = static_cast<int>((count + nch) % n);
            checkCase(c);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// A 1 MiB case is also run through the interpreter once per combination.
TEST_P(BuilderTest, LargeMessageComputes) {
  const Combo combo = GetParam();
  Case c{combo.coll, combo.algo,   5, (uint64_t{1} << 20) / 4 + 3, groveInt32,
         false,      PlanParams{}, 3};
  c.params.nChannels = 2;
  c.params.chunkBytes = 16 << 10;
  checkCase(c, /*forceInterpret=*/true);
}

INSTANTIATE_TEST_SUITE_P(All, BuilderTest, ::testing::ValuesIn(testing::kCombos),
                         testing::comboName);

// ------------------------------------------------------------------ structure

int countKind(const Program& p, StepKind k) {
  int n = 0;
  for (const Phase& ph : p.phases)
    for (const Lane& l : ph.lanes)
      for (const Step& s : l.steps) n += s.kind == k;
  return n;
}

TEST(RingAllReduce, FollowsNcclStepStructure) {
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.count = 4 * 16;  // exactly one loop of 4 chunks of 16 floats
  a.nranks = 4;
  a.rank = 1;
  PlanParams p;
  p.chunkBytes = 64;
  Program prog = buildRingAllReduce(a, p);
  ASSERT_EQ(prog.phases.size(), 1u);
  ASSERT_EQ(prog.phases[0].lanes.size(), 1u);
  const auto& steps = prog.phases[0].lanes[0].steps;
  const StepKind want[] = {StepKind::kSend,
                           StepKind::kRecvReduceSend,
                           StepKind::kRecvReduceSend,
                           StepKind::kRecvReduceCopySend,
                           StepKind::kRecvCopySend,
                           StepKind::kRecvCopySend,
                           StepKind::kRecv};
  ASSERT_EQ(steps.size(), 7u) << describe(prog);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(steps[i].kind, want[i]) << i;
    EXPECT_EQ(steps[i].bytes, 64u);
    EXPECT_EQ(steps[i].final, want[i] == StepKind::kRecvReduceCopySend);
  }
  EXPECT_EQ(steps[0].src.offset, 0u);        // chunk r-1 = 0
  EXPECT_EQ(steps[3].dst.offset, 64u);       // chunk r = 1 completes here
  EXPECT_EQ(steps[6].dst.offset, 2u * 64u);  // chunk r+1 arrives last
  EXPECT_EQ(steps[0].sendPeer, 2);
  EXPECT_EQ(steps[1].recvPeer, 0);
}

TEST(RingAllReduce, ShortLastLoopSplitsEvenlyAndChannelsUseOwnLanes) {
  CollArgs a;
  a.count = 3 * 8 + 5;  // per channel: 1 full loop of 3x8 + 5 split as 2,2,1 (+ the 2nd channel)
  a.nranks = 3;
  PlanParams p;
  p.chunkBytes = 32;
  p.nChannels = 2;
  Program prog = buildRingAllReduce(a, p);
  ASSERT_EQ(prog.phases[0].lanes.size(), 2u);
  for (size_t l = 0; l < 2; ++l)
    for (const Step& s : prog.phases[0].lanes[l].steps) {
      EXPECT_EQ(s.channel, static_cast<int>(l));
      EXPECT_LE(s.bytes, 32u);
    }
}

uint64_t bytesSent(const Program& p) {
  uint64_t total = 0;
  for (const Phase& ph : p.phases)
    for (const Lane& l : ph.lanes)
      for (const Step& s : l.steps) total += s.kind == StepKind::kSend ? s.bytes : 0;
  return total;
}

// Halving-doubling: 2 log2(P) exchange rounds that move 2(P-1)/P of the
// vector, as the ring does; with n = P + e ranks the e extra ranks only hand
// their input over and take the result back (one phase each way).
TEST(HalvingAllReduce, MovesWhatTheRingMovesInTwoLog2PRounds) {
  CollArgs a;
  a.count = 8000;
  for (int nch : {1, 2}) {
    PlanParams p;
    p.nChannels = nch;
    a.nranks = 8;
    for (int r = 0; r < 8; ++r) {
      a.rank = r;
      Program prog = buildHalvingAllReduce(a, p);
      EXPECT_EQ(prog.phases.size(), 6u) << describe(prog);
      EXPECT_EQ(bytesSent(prog), 2 * 32000u * 7 / 8);
      EXPECT_EQ(countKind(prog, StepKind::kRecvReduce), 3 * nch);
      EXPECT_EQ(prog.algo, "halving");
    }
    a.nranks = 6;  // P = 4, ranks 0 and 2 fold into 1 and 3
    for (int r = 0; r < 6; ++r) {
      a.rank = r;
      Program prog = buildHalvingAllReduce(a, p);
      const bool handsOver = r == 0 || r == 2, folds = r == 1 || r == 3;
      EXPECT_EQ(prog.phases.size(), handsOver ? 2u : (folds ? 6u : 4u)) << "rank " << r;
      EXPECT_EQ(bytesSent(prog), handsOver ? 32000u : 2 * 32000u * 3 / 4 + (folds ? 32000u : 0u));
    }
  }
}

// The largest rounds (the first of the reduce-scatter and the last of the
// all-gather, half the vector each) are between neighbours r and r ^ 1, and
// each later round halves the bytes as the distance doubles.
TEST(HalvingAllReduce, LargestRoundsAreBetweenNeighbours) {
  CollArgs a;
  a.count = 8000;
  a.nranks = 8;
  for (int r = 0; r < 8; ++r) {
    a.rank = r;
    Program prog = buildHalvingAllReduce(a, PlanParams{});
    ASSERT_EQ(prog.phases.size(), 6u);
    const int peers[6] = {r ^ 1, r ^ 2, r ^ 4, r ^ 4, r ^ 2, r ^ 1};
    const uint64_t bytes[6] = {16000, 8000, 4000, 4000, 8000, 16000};
    for (size_t ph = 0; ph < 6; ++ph) {
      bool sawSend = false;
      for (const Lane& l : prog.phases[ph].lanes)
        for (const Step& s : l.steps) {
          if (s.kind != StepKind::kSend) continue;
          sawSend = true;
          EXPECT_EQ(s.sendPeer, peers[ph]) << "rank " << r << " phase " << ph;
          EXPECT_EQ(s.bytes, bytes[ph]) << "rank " << r << " phase " << ph;
        }
      EXPECT_TRUE(sawSend) << "rank " << r << " phase " << ph;
    }
  }
}

TEST(Builders, SingleRankIsACopyOrNothing) {
  CollArgs a;
  a.count = 10;
  for (Coll c : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather,
                 Coll::kReduceScatter, Coll::kGather, Coll::kScatter, Coll::kAlltoAll}) {
    a.coll = c;
    for (Algo algo : {Algo::kRing, Algo::kDirect, Algo::kDoubling, Algo::kHalving}) {
      if (!algoSupports(algo, c)) continue;
      a.inPlace = false;
      Program p = build(algo, a, PlanParams{});
      EXPECT_EQ(countKind(p, StepKind::kCopy), 1) << collName(c) << describe(p);
      if (c == Coll::kAlltoAll) continue;
      a.inPlace = true;
      EXPECT_TRUE(build(algo, a, PlanParams{}).phases.empty()) << collName(c);
    }
  }
}

TEST(Builders, DirectAllReduceReducesInRankOrder) {
  CollArgs a;
  a.count = 4;
  a.nranks = 4;
  a.rank = 2;
  for (bool inPlace : {false, true}) {
    a.inPlace = inPlace;
    Program p = buildDirectAllReduce(a, PlanParams{});
    ASSERT_EQ(p.phases.size(), 2u);
    const auto& steps = p.phases[1].lanes.at(0).steps;
    ASSERT_EQ(steps.size(), 4u);
    EXPECT_EQ(steps[0].kind, StepKind::kCopy);
    // Contribution j sits in scratch slot j (in place) or comes from the input (j == rank).
    for (int j = 1; j < 4; ++j) {
      EXPECT_EQ(steps[j].kind, StepKind::kReduce);
      EXPECT_EQ(steps[j].final, j == 3);
      const Buf want = (!inPlace && j == 2) ? Buf::kInput : Buf::kScratch;
      EXPECT_EQ(steps[j].src.buf, want);
    }
    EXPECT_EQ(p.scratchBytes, (inPlace ? 4u : 3u) * 16u);
  }
}

TEST(Builders, RejectBadArguments) {
  CollArgs a;
  a.count = 8;
  a.nranks = 4;
  a.rank = 4;
  EXPECT_THROW(buildRingAllReduce(a, PlanParams{}), Error);
  a.rank = 0;
  a.coll = Coll::kBroadcast;
  a.root = -1;
  EXPECT_THROW(buildChainBroadcast(a, PlanParams{}), Error);
  a.root = 0;
  PlanParams p;
  p.chunkBytes = 0;
  EXPECT_THROW(buildChainBroadcast(a, p), Error);
  p = PlanParams{};
  p.nChannels = 0;
  EXPECT_THROW(buildChainBroadcast(a, p), Error);
  a.coll = Coll::kAlltoAll;
  a.inPlace = true;  // allowed: staged through scratch
  EXPECT_EQ(buildAlltoAll(a, PlanParams{}).scratchBytes, 4u * 8u * dtypeSize(a.dtype));
  a.inPlace = false;
  a.coll = Coll::kReduceScatter;
  EXPECT_THROW(build(Algo::kDoubling, a, PlanParams{}), Error);
}

TEST(Builders, MessageBytesCountsLikeNccl) {
  CollArgs a;
  a.count = 10;
  a.nranks = 4;
  a.dtype = groveFloat64;
  a.coll = Coll::kAllReduce;
  EXPECT_EQ(messageBytes(a), 80u);
  a.coll = Coll::kAllGather;
  EXPECT_EQ(messageBytes(a), 320u);
  a.coll = Coll::kReduceScatter;
  EXPECT_EQ(messageBytes(a), 320u);
}

// Exchanges cut each block over the channels, a lane per (peer, channel),
// at most 32 send lanes per rank; each range lands where the block's
// elements belong.
TEST(Exchange, BlocksCutOverChannels) {
  PlanParams p;
  p.nChannels = 32;
  const CollArgs two{Coll::kAlltoAll, 1000, groveFloat32, groveSum, 1, 0, 2, false};
  const Program a2a = build(Algo::kDirect, two, p);
  ASSERT_EQ(a2a.phases.size(), 1u);
  EXPECT_EQ(a2a.phases[0].lanes.size(), 2u * 32 + 1);  // 32 sends, 32 receives, the own copy
  const CollArgs five{Coll::kGather, 1000, groveFloat32, groveSum, 0, 0, 5, false};
  const Program g = build(Algo::kDirect, five, p);
  ASSERT_EQ(g.phases.size(), 1u);
  EXPECT_EQ(g.phases[0].lanes.size(), 4u * 8 + 1);  // 8 channels for each of 4 peers
  uint64_t covered = 0;
  for (const Lane& l : g.phases[0].lanes) {
    ASSERT_EQ(l.steps.size(), 1u);
    const Step& s = l.steps[0];
    if (s.kind != StepKind::kRecv || s.recvPeer != 3) continue;
    EXPECT_GE(s.dst.offset, 3u * 4000);
    EXPECT_LE(s.dst.offset + s.bytes, 4u * 4000);
    EXPECT_EQ(s.bytes % 4, 0u);
    covered += s.bytes;
  }
  EXPECT_EQ(covered, 4000u);
}

}  // namespace
}  // namespace grove::plan
