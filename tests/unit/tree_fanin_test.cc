// Fan-in steps (Step::moreRecvPeers) in the structural checks: the
// validator (every source link matched on its own, bad extras rejected), the
// deadlock simulation (a fan-in step moves what its emptiest source holds)
// and the reference interpreter (sources folded in order, final once).
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/builders/builder_util.h"
#include "base/error.h"
#include "ir/step_traits.h"
#include "ir/validate.h"
#include "tree_check.h"

namespace grove::plan {
namespace {

/// 1 and 2 send `bytes` to 0, which reduces both in one fan-in RecvReduce.
std::vector<Program> fanInPrograms(uint64_t bytes) {
  Step reduce = detail::netStep(StepKind::kRecvReduce, 1, -1, 0, detail::ref(Buf::kInput, 0),
                                detail::ref(Buf::kOutput, 0), bytes, true);
  reduce.moreRecvPeers[0] = 2;
  std::vector<Program> progs(3);
  progs[0].phases.push_back(Phase{{Lane{{reduce}}}});
  for (int r : {1, 2}) {
    const Step send =
        detail::netStep(StepKind::kSend, -1, 0, 0, detail::ref(Buf::kInput, 0), {}, bytes);
    progs[r].phases.push_back(Phase{{Lane{{send}}}});
  }
  return progs;
}

TEST(FanIn, ValidatorChecksEverySource) {
  ValidateOptions vo;
  validatePrograms(fanInPrograms(64), vo);
  auto rejects = [&](const std::vector<Program>& progs, const std::string& what) {
    testing::expectRejected(progs, vo, what);
  };
  auto progs = fanInPrograms(64);
  progs[2].phases.clear();  // source 2 never sends
  rejects(progs, "has no matching send");
  progs = fanInPrograms(64);
  progs[2].phases[0].lanes[0].steps[0].bytes = 32;  // a different byte count from one source
  rejects(progs, "but receives");
  auto step = [](std::vector<Program>& p) -> Step& { return p[0].phases[0].lanes[0].steps[0]; };
  progs = fanInPrograms(64);
  step(progs).moreRecvPeers = {1, -1, -1};
  rejects(progs, "receives from rank 1 twice");
  progs = fanInPrograms(64);
  step(progs).moreRecvPeers = {-1, 2, -1};
  rejects(progs, "after an unused");
  progs = fanInPrograms(64);
  step(progs).moreRecvPeers = {2, 0, -1};
  rejects(progs, "the rank itself");
  progs = fanInPrograms(64);
  step(progs).moreRecvPeers = {2, 3, -1};
  rejects(progs, "out of range");
  progs = fanInPrograms(64);
  step(progs).kind = StepKind::kRecv;  // a plain receive cannot fan in
  rejects(progs, "cannot fan in");
  progs = fanInPrograms(64);
  progs[1].phases[0].lanes[0].steps[0].moreRecvPeers = {2, -1, -1};  // on a send
  rejects(progs, "cannot fan in");
  // A second lane receiving from 2 in the same phase collides with the fan-in's stream.
  progs = fanInPrograms(64);
  progs[0].phases[0].lanes.push_back(
      Lane{{detail::netStep(StepKind::kRecv, 2, -1, 0, {}, detail::ref(Buf::kOutput, 0), 64)}});
  rejects(progs, "same phase");
  EXPECT_NE(describe(step(progs)).find("{1,2}->[me] ch0"), std::string::npos)
      << describe(step(progs));
}

TEST(FanIn, SimulationWaitsForTheEmptiestSource) {
  SimOptions so;
  so.linkCapacity = 64;
  EXPECT_TRUE(simulatePrograms(fanInPrograms(1000), so).completed);
  // Source 2 only sends after it has received from 1, which sends after 0's
  // fan-in: 0 needs 2's bytes to go on, so 1 stalls once 1->0 is full and
  // 1000 B cannot pass 64 B links.
  auto progs = fanInPrograms(1000);
  progs[1].phases[0].lanes[0].steps.push_back(
      detail::netStep(StepKind::kSend, -1, 2, 1, detail::ref(Buf::kInput, 0), {}, 8));
  progs[2].phases[0].lanes[0].steps.insert(
      progs[2].phases[0].lanes[0].steps.begin(),
      detail::netStep(StepKind::kRecv, 1, -1, 1, {}, detail::ref(Buf::kOutput, 0), 8));
  const SimResult stuck = simulatePrograms(progs, so);
  EXPECT_FALSE(stuck.completed);
  EXPECT_NE(stuck.problem.find("deadlock"), std::string::npos) << stuck.problem;
  so.linkCapacity = 1024;  // room for the whole step: it completes
  EXPECT_TRUE(simulatePrograms(progs, so).completed) << simulatePrograms(progs, so).problem;
}

TEST(FanIn, InterpreterFoldsEverySource) {
  // Ranks 1..3 send to 0, which reduces them (avg: final divides once).
  const uint64_t es = 4, count = 5, bytes = count * es;
  Step reduce = detail::netStep(StepKind::kRecvReduce, 3, -1, 0, detail::ref(Buf::kInput, 0),
                                detail::ref(Buf::kOutput, 0), bytes, true);
  reduce.moreRecvPeers = {1, 2, -1};
  std::vector<Program> progs(4);
  progs[0].phases.push_back(Phase{{Lane{{reduce}}}});
  for (int r = 1; r < 4; ++r)
    progs[r].phases.push_back(Phase{{Lane{
        {detail::netStep(StepKind::kSend, -1, 0, 0, detail::ref(Buf::kInput, 0), {}, bytes)}}}});
  std::vector<testing::RankMemory> mem(4);
  for (int r = 0; r < 4; ++r) {
    mem[r].arenaIn.resize(bytes);
    mem[r].arenaOut.assign(bytes, 0);
    for (uint64_t i = 0; i < count; ++i) {
      const uint32_t v = static_cast<uint32_t>(10 * r + i);
      std::memcpy(mem[r].arenaIn.data() + i * es, &v, es);
    }
    mem[r].in = mem[r].arenaIn.data();
    mem[r].out = mem[r].arenaOut.data();
  }
  testing::Interpreter(progs, mem, es, /*avg=*/true).run();
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t got = 0;
    std::memcpy(&got, mem[0].out + i * es, es);
    EXPECT_EQ(got, (60 + 4 * i) / 4) << i;
  }
  // A missing source: the interpreter reports the programs stuck.
  progs[2].phases.clear();
  EXPECT_THROW(testing::Interpreter(progs, mem, es, true).run(), std::runtime_error);
}

}  // namespace
}  // namespace grove::plan
