// Lowering plan::Programs to the device form (exec/device/dev_program.h):
// ring tables in first-use order, binding slots, dropped zero-byte steps,
// lanes and phases, the checks that reject what the device cannot run, and
// describe(); then every builder's programs lowered step for step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithm_combos.h"
#include "algorithms/select/selector.h"
#include "base/error.h"
#include "exec/device/dev_program.h"
#include "ir/step_traits.h"
#include "ir_steps.h"

namespace grove::exec::dev {
namespace {

using plan::Buf;
using plan::BufRef;
using plan::Step;
using plan::StepKind;
using transport::LinkKey;

using plan::testing::extra;
using plan::testing::in;
using plan::testing::out;
using plan::testing::scratch;
using plan::testing::step;

// Phase 0: lane 0 sends to 1 (ch 0), a zero-byte send, receives from 2;
// lane 1 fans out to 2 and 3 on ch 1 from extra 1, then copies in -> scratch.
// Phase 1: lane 0 reduces in from 1 and 2 (ch 0); lane 1 has only a zero-byte step.
// Phase 2: zero-byte steps only.
plan::Program sample() {
  plan::Program p;
  p.algo = "sample";
  p.scratchBytes = 64;
  p.phases.resize(3);
  p.phases[0].lanes.resize(2);
  p.phases[0].lanes[0].steps = {step(StepKind::kSend, 1, -1, 0, in(0), {}, 100),
                                step(StepKind::kSend, 1, -1, 0, in(0), {}, 0),
                                step(StepKind::kRecv, -1, 2, 0, {}, out(16), 48)};
  Step fan = step(StepKind::kSend, 2, -1, 1, extra(1, 8), {}, 32);
  fan.moreSendPeers = {3, -1, -1};
  p.phases[0].lanes[1].steps = {fan, step(StepKind::kCopy, -1, -1, 0, in(0), scratch(0), 64)};
  p.phases[1].lanes.resize(2);
  Step red = step(StepKind::kRecvReduce, -1, 1, 0, out(0), out(0), 40, true);
  red.moreRecvPeers = {2, -1, -1};
  p.phases[1].lanes[0].steps = {red};
  p.phases[1].lanes[1].steps = {step(StepKind::kRecv, -1, 3, 0, {}, out(0), 0)};
  p.phases[2].lanes.resize(1);
  p.phases[2].lanes[0].steps = {step(StepKind::kCopy, -1, -1, 0, in(0), out(0), 0)};
  return p;
}

TEST(DevLower, TablesSlotsAndDroppedSteps) {
  const DevProgram d = lowerProgram(sample());
  EXPECT_EQ(d.algo, "sample");
  EXPECT_EQ(d.scratchBytes, 64u);
  ASSERT_EQ(d.phases.size(), 2u);  // phase 2 had no bytes
  ASSERT_EQ(d.lanes.size(), 3u);   // phase 1's lane 1 had no bytes
  ASSERT_EQ(d.steps.size(), 5u);   // the zero-byte send is gone
  EXPECT_EQ(d.maxLanes, 2u);
  EXPECT_EQ(d.nSlots, 5u);  // extra 1 -> slot 4
  EXPECT_EQ(d.phases[0].begin, 0u);
  EXPECT_EQ(d.phases[0].end, 2u);
  EXPECT_EQ(d.phases[1].begin, 2u);
  EXPECT_EQ(d.phases[1].end, 3u);
  EXPECT_EQ(d.lanes[0].end - d.lanes[0].begin, 2u);
  EXPECT_EQ(d.lanes[1].end - d.lanes[1].begin, 2u);
  // Rings in first-use order.
  const std::vector<LinkKey> sends = {{1, 0, 0}, {2, 1, 0}, {3, 1, 0}};
  const std::vector<LinkKey> recvs = {{2, 0, 0}, {1, 0, 0}};
  EXPECT_EQ(d.sendKeys, sends);
  EXPECT_EQ(d.recvKeys, recvs);
  const DevStep& s0 = d.steps[0];
  EXPECT_EQ(s0.kind, static_cast<uint8_t>(StepKind::kSend));
  EXPECT_EQ(s0.nSend, 1);
  EXPECT_EQ(s0.nRecv, 0);
  EXPECT_EQ(s0.send[0], 0);
  EXPECT_EQ(s0.srcSlot, kSlotInput);
  EXPECT_EQ(s0.bytes, 100u);
  const DevStep& s1 = d.steps[1];
  EXPECT_EQ(s1.kind, static_cast<uint8_t>(StepKind::kRecv));
  EXPECT_EQ(s1.recv[0], 0);
  EXPECT_EQ(s1.dstSlot, kSlotOutput);
  EXPECT_EQ(s1.dstOff, 16u);
  const DevStep& fan = d.steps[2];
  EXPECT_EQ(fan.nSend, 2);
  EXPECT_EQ(fan.send[0], 1);
  EXPECT_EQ(fan.send[1], 2);
  EXPECT_EQ(fan.srcSlot, kSlotExtra0 + 1);
  EXPECT_EQ(fan.srcOff, 8u);
  const DevStep& copy = d.steps[3];
  EXPECT_EQ(copy.nSend + copy.nRecv, 0);
  EXPECT_EQ(copy.dstSlot, kSlotScratch);
  const DevStep& red = d.steps[4];
  EXPECT_EQ(red.kind, static_cast<uint8_t>(StepKind::kRecvReduce));
  EXPECT_EQ(red.nRecv, 2);
  EXPECT_EQ(red.recv[0], 1);  // rank 1 first: the reduction order
  EXPECT_EQ(red.recv[1], 0);
  EXPECT_EQ(red.final, 1);
}

TEST(DevLower, RoutesMakeSeparateRings) {
  plan::Program p;
  p.phases.resize(2);
  p.phases[0].lanes.resize(1);
  p.phases[0].lanes[0].steps = {step(StepKind::kSend, 1, -1, 0, in(0), {}, 16),
                                step(StepKind::kSend, 1, -1, 1, in(0), {}, 16)};
  p.phases[1].lanes.resize(1);
  p.phases[1].lanes[0].steps = {step(StepKind::kRecv, -1, 1, 1, {}, out(0), 16)};
  const DevProgram d = lowerProgram(
      p, [](int peer, int channel, bool send) { return channel == 1 && send ? 7u : 0u; });
  const std::vector<LinkKey> sends = {{1, 0, 0}, {1, 1, 7}};
  const std::vector<LinkKey> recvs = {{1, 1, 0}};
  EXPECT_EQ(d.sendKeys, sends);
  EXPECT_EQ(d.recvKeys, recvs);
  EXPECT_EQ(d.nSlots, 3u);
}

void expectRejected(const plan::Program& p, const std::string& words) {
  try {
    lowerProgram(p);
    ADD_FAILURE() << "lowered a program that should be rejected (" << words << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInternalError);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

plan::Program oneLane(std::vector<Step> steps) {
  plan::Program p;
  p.scratchBytes = 32;
  p.phases.resize(1);
  p.phases[0].lanes.resize(1);
  p.phases[0].lanes[0].steps = std::move(steps);
  return p;
}

TEST(DevLower, RejectsWhatTheDeviceCannotRun) {
  expectRejected(oneLane({step(StepKind::kRecv, -1, 1, 0, {}, in(0), 16)}), "writes the input");
  expectRejected(oneLane({step(StepKind::kCopy, -1, -1, 0, in(0), scratch(16), 32)}),
                 "past the scratch buffer");
  expectRejected(oneLane({step(StepKind::kSend, -1, -1, 0, in(0), {}, 16)}), "sends to no rank");
  expectRejected(oneLane({step(StepKind::kRecv, -1, -1, 0, {}, out(0), 16)}),
                 "receives from no rank");
  expectRejected(oneLane({step(StepKind::kCopy, -1, -1, 0, extra(kMaxSlots, 0), out(0), 16)}),
                 "extra buffer");
  plan::Program two = oneLane({step(StepKind::kSend, 3, -1, 2, in(0), {}, 16)});
  two.phases[0].lanes.push_back(two.phases[0].lanes[0]);
  expectRejected(two, "in two lanes (lanes 0 and 1)");
  // The same ring in two phases, or two lanes with zero-byte steps on one ring, is fine.
  plan::Program phases = oneLane({step(StepKind::kSend, 3, -1, 2, in(0), {}, 16)});
  phases.phases.push_back(phases.phases[0]);
  phases.phases[1].lanes.push_back(plan::Lane{{step(StepKind::kSend, 3, -1, 2, in(0), {}, 0)}});
  EXPECT_NO_THROW(lowerProgram(phases));
}

// LowerOptions: a lane of one long local step becomes lanes of one piece
// each, cut at 4 KiB multiples; everything else stays as it was.
TEST(DevLower, CutsLongLocalStepsIntoLanes) {
  const LowerOptions cut{8192, 4};
  plan::Program p = oneLane({step(StepKind::kCopy, -1, -1, 0, in(100), out(36), 30000)});
  p.phases[0].lanes.push_back(plan::Lane{{step(StepKind::kSend, 1, -1, 0, in(0), {}, 64)}});
  p.phases[0].lanes.push_back(
      plan::Lane{{step(StepKind::kReduce, -1, -1, 0, in(0), out(0), 16384)}});
  DevProgram d = lowerProgram(p, {}, cut);
  // 30000 B: 3 pieces of 12288, 12288 and 5424 B; the send; 16384 B: 2 pieces.
  ASSERT_EQ(d.lanes.size(), 6u);
  EXPECT_EQ(d.maxLanes, 6u);
  const uint64_t bytes[] = {12288, 12288, 5424, 64, 8192, 8192};
  const uint64_t srcOff[] = {100, 12388, 24676, 0, 0, 8192};
  for (size_t l = 0; l < 6; ++l) {
    SCOPED_TRACE("lane " + std::to_string(l));
    ASSERT_EQ(d.lanes[l].end - d.lanes[l].begin, 1u);
    const DevStep& s = d.steps[d.lanes[l].begin];
    EXPECT_EQ(s.bytes, bytes[l]);
    EXPECT_EQ(s.srcOff, srcOff[l]);
    if (l < 3) {
      EXPECT_EQ(s.dstOff, srcOff[l] - 64);
    }
    EXPECT_EQ(s.kind, static_cast<uint8_t>(l < 3    ? StepKind::kCopy
                                           : l == 3 ? StepKind::kSend
                                                    : StepKind::kReduce));
  }
  // Never cut: without options, short steps, two steps in a lane, extra
  // buffers, a source overlapping the destination.
  EXPECT_EQ(lowerProgram(p).lanes.size(), 3u);
  const std::vector<std::vector<Step>> kept = {
      {step(StepKind::kCopy, -1, -1, 0, in(0), out(0), 16383)},
      {step(StepKind::kCopy, -1, -1, 0, in(0), out(0), 30000),
       step(StepKind::kCopy, -1, -1, 0, in(0), out(0), 30000)},
      {step(StepKind::kCopy, -1, -1, 0, extra(0, 0), out(0), 30000)},
      {step(StepKind::kCopy, -1, -1, 0, out(0), out(4096), 30000)}};
  for (const std::vector<Step>& steps : kept)
    EXPECT_EQ(lowerProgram(oneLane(steps), {}, cut).lanes.size(), 1u) << steps[0].bytes;
  // Same buffer, apart: cut.
  EXPECT_EQ(
      lowerProgram(oneLane({step(StepKind::kCopy, -1, -1, 0, out(0), out(30000), 30000)}), {}, cut)
          .lanes.size(),
      3u);
  // At most maxSplitLanes pieces.
  d = lowerProgram(oneLane({step(StepKind::kCopy, -1, -1, 0, in(0), out(0), 1 << 20)}), {}, cut);
  EXPECT_EQ(d.lanes.size(), 4u);
}

TEST(DevLower, Describe) {
  const std::string text = describe(lowerProgram(sample()));
  for (const char* want :
       {"device program 'sample': 2 phases, 3 lanes (at most 2 at once), 5 steps, 5 slots",
        "sends: s0=rank 1 ch 0, s1=rank 2 ch 1, s2=rank 3 ch 1",
        "recvs: r0=rank 2 ch 0, r1=rank 1 ch 0", "phase 1",
        "send to s1(rank 2) s2(rank 3) src=extra1+8 32B",
        "recvReduce from r1(rank 1) r0(rank 2) src=out+0 dst=out+0 40B final",
        "copy src=in+0 dst=scratch+0 64B"}) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing '" << want << "' in\n" << text;
  }
}

// Every builder's programs: each non-empty step lowered in order, its peers
// found again through the ring tables, its operands through the slots.
TEST(DevLower, EveryBuilderStepForStep) {
  for (const plan::testing::Combo& combo : plan::testing::kCombos) {
    for (int n : {2, 5}) {
      plan::PlanParams params;
      params.nChannels = 2;
      params.chunkBytes = 1024;
      const plan::CollArgs args{combo.coll, 3001, groveFloat32, groveSum, 1, n - 1, n, false};
      const plan::Program p = plan::build(combo.algo, args, params);
      const DevProgram d = lowerProgram(p);
      SCOPED_TRACE(std::string(plan::collName(combo.coll)) + " n=" + std::to_string(n));
      size_t i = 0;
      for (const plan::Phase& ph : p.phases)
        for (const plan::Lane& ln : ph.lanes)
          for (const Step& s : ln.steps) {
            if (s.bytes == 0) continue;
            ASSERT_LT(i, d.steps.size());
            const DevStep& ds = d.steps[i++];
            EXPECT_EQ(ds.kind, static_cast<uint8_t>(s.kind));
            EXPECT_EQ(ds.bytes, s.bytes);
            ASSERT_EQ(ds.nSend, plan::sendPeerCount(s));
            ASSERT_EQ(ds.nRecv, plan::recvPeerCount(s));
            for (int k = 0; k < ds.nSend; ++k)
              EXPECT_EQ(d.sendKeys[ds.send[k]], (LinkKey{plan::sendPeerAt(s, k), s.channel, 0}));
            for (int k = 0; k < ds.nRecv; ++k)
              EXPECT_EQ(d.recvKeys[ds.recv[k]], (LinkKey{plan::recvPeerAt(s, k), s.channel, 0}));
            if (plan::stepReadsSrc(s.kind)) {
              EXPECT_EQ(ds.srcOff, s.src.offset);
            }
            if (plan::stepWritesDst(s.kind)) {
              EXPECT_EQ(ds.dstOff, s.dst.offset);
            }
          }
      EXPECT_EQ(i, d.steps.size());
    }
  }
}

}  // namespace
}  // namespace grove::exec::dev
