// Host executor over the loopback transport: fan-in steps (a reducing
// receive with several sources, Step::moreRecvPeers) on thread ranks. Each
// source streams over its own small ring, so pieces are limited by whichever
// source holds the least; the result must be bit-identical to folding the
// sources in the step's order (src op r0 op r1 ...) with avg's division once,
// at the end.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "exec/host_executor.h"
#include "kernels/cpu/reduce.h"
#include "unit/harness/thread_ranks.h"

namespace grove {
namespace {

using exec::Buffers;
using exec::ReduceSpec;
using harness::runProgramsOnThreads;
using plan::Buf;
using plan::BufRef;
using plan::Program;
using plan::Step;
using plan::StepKind;

BufRef in(uint64_t off = 0) { return BufRef{Buf::kInput, 0, off}; }
BufRef out(uint64_t off = 0) { return BufRef{Buf::kOutput, 0, off}; }

Step send(int peer, BufRef src, uint64_t bytes) {
  Step s;
  s.kind = StepKind::kSend;
  s.sendPeer = peer;
  s.src = src;
  s.bytes = bytes;
  return s;
}

Step recv(int peer, BufRef dst, uint64_t bytes) {
  Step s;
  s.kind = StepKind::kRecv;
  s.recvPeer = peer;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}

/// A reducing receive from `from` (recvPeer first, then the extra sources).
Step fanIn(StepKind kind, std::vector<int> from, int to, BufRef src, BufRef dst, uint64_t bytes,
           bool final) {
  Step s;
  s.kind = kind;
  s.recvPeer = from[0];
  for (size_t i = 1; i < from.size(); ++i) s.moreRecvPeers[i - 1] = from[i];
  s.sendPeer = to;
  s.src = src;
  s.dst = dst;
  s.bytes = bytes;
  s.final = final;
  return s;
}

Program program(std::vector<std::vector<Step>> lanes) {
  Program p;
  plan::Phase ph;
  for (auto& steps : lanes) ph.lanes.push_back(plan::Lane{steps});
  p.phases.push_back(ph);
  p.algo = "test";
  return p;
}

/// `count` elements of `dtype` for rank r: small non-integral values, so the
/// order of float operations shows in the bits.
std::vector<uint8_t> values(groveDataType_t dtype, size_t count, int r) {
  std::vector<uint8_t> v(count * dtypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    const float f = static_cast<float>((i * (r + 3) + r) % 17) * 0.37f - 2.0f + 0.01f * r;
    uint8_t* p = v.data() + i * dtypeSize(dtype);
    if (dtype == groveFloat32) {
      std::memcpy(p, &f, 4);
    } else if (dtype == groveFloat16 || dtype == groveBfloat16) {
      const uint16_t h = dtype == groveFloat16 ? kernels::floatToHalf(f) : kernels::floatToBf16(f);
      std::memcpy(p, &h, 2);
    } else {
      const int32_t x = static_cast<int32_t>((i * (r + 5)) % 1001) - 300;
      std::memcpy(p, &x, 4);
    }
  }
  return v;
}

/// src op r0 op r1 ..., one operation at a time, final at the last.
std::vector<uint8_t> fold(const ReduceSpec& spec, const std::vector<uint8_t>& src,
                          const std::vector<std::vector<uint8_t>>& ins) {
  std::vector<uint8_t> acc = src;
  const size_t count = src.size() / dtypeSize(spec.dtype);
  for (size_t k = 0; k < ins.size(); ++k)
    kernels::reduce(spec.dtype, spec.op, acc.data(), nullptr, acc.data(), ins[k].data(), count,
                    k + 1 == ins.size(), spec.nranks);
  return acc;
}

// Ranks 1..k send to rank 0, which reduces them all in one RecvReduce step
// (two steps: the second has an odd element count, so every link's next step
// start is padded differently). Every dtype class, every op, 2..4 sources.
TEST(ExecutorFanIn, RecvReduceFoldsEverySourceInOrder) {
  const size_t c1 = 20011, c2 = 7;
  for (groveDataType_t dtype : {groveFloat32, groveFloat16, groveBfloat16, groveInt32}) {
    for (groveRedOp_t op : {groveSum, groveProd, groveMax, groveMin, groveAvg}) {
      for (int k = 2; k <= 4; ++k) {
        const int n = k + 1;
        const uint64_t es = dtypeSize(dtype), b1 = c1 * es, b2 = c2 * es;
        std::vector<std::vector<uint8_t>> data(n);
        for (int r = 0; r < n; ++r) data[r] = values(dtype, c1 + c2, r);
        std::vector<int> sources;
        for (int r = k; r >= 1; --r) sources.push_back(r);  // descending: order is the step's
        std::vector<Program> progs = {program({{
            fanIn(StepKind::kRecvReduce, sources, -1, in(), out(), b1, true),
            fanIn(StepKind::kRecvReduce, sources, -1, in(b1), out(b1), b2, true),
        }})};
        for (int r = 1; r < n; ++r)
          progs.push_back(program({{send(0, in(), b1), send(0, in(b1), b2)}}));
        std::vector<uint8_t> result(data[0].size());
        std::vector<Buffers> bufs(n);
        for (int r = 0; r < n; ++r) bufs[r].input = data[r].data();
        bufs[0].output = result.data();
        const ReduceSpec spec{dtype, op, n};
        runProgramsOnThreads(progs, bufs, spec, 4 << 10, 20.0);
        std::vector<std::vector<uint8_t>> ins;
        for (int r : sources) ins.push_back(data[r]);
        EXPECT_TRUE(result == fold(spec, data[0], ins))
            << "dtype " << dtype << " op " << op << " sources " << k;
      }
    }
  }
}

// The fused kinds fan in too, and combine with fan-out: 3 reduces {1, 2}
// into its output and sends the result to {0, 4}; 4 reduces {3, 5} and
// sends it to 0 without keeping a copy. avg divides only where final.
TEST(ExecutorFanIn, FusedFanInStepsSendTheFoldedResult) {
  const size_t count = 50021;
  for (groveDataType_t dtype : {groveFloat32, groveBfloat16}) {
    for (groveRedOp_t op : {groveSum, groveAvg}) {
      const uint64_t b = count * dtypeSize(dtype);
      std::vector<std::vector<uint8_t>> data(6);
      for (int r = 0; r < 6; ++r) data[r] = values(dtype, count, r);
      Step copySend = fanIn(StepKind::kRecvReduceCopySend, {1, 2}, 0, in(), out(), b, false);
      copySend.moreSendPeers[0] = 4;
      std::vector<Program> progs = {
          program({{recv(3, out(), b)}, {recv(4, out(b), b)}}),
          program({{send(3, in(), b)}}),
          program({{send(3, in(), b)}}),
          program({{copySend}}),
          program({{fanIn(StepKind::kRecvReduceSend, {3, 5}, 0, in(), {}, b, true)}}),
          program({{send(4, in(), b)}}),
      };
      std::vector<uint8_t> out0(2 * b), out3(b);
      std::vector<Buffers> bufs(6);
      for (int r = 0; r < 6; ++r) bufs[r].input = data[r].data();
      bufs[0].output = out0.data();
      bufs[3].output = out3.data();
      const ReduceSpec spec{dtype, op, 6};
      runProgramsOnThreads(progs, bufs, spec, 8 << 10, 20.0);
      // Not final at 3: avg acts as sum there.
      const ReduceSpec sum{dtype, op == groveAvg ? groveSum : op, 6};
      const auto at3 = fold(sum, data[3], {data[1], data[2]});
      const auto at4 = fold(spec, data[4], {at3, data[5]});
      EXPECT_TRUE(out3 == at3) << "dtype " << dtype << " op " << op;
      EXPECT_TRUE(std::vector<uint8_t>(out0.begin(), out0.begin() + b) == at3);
      EXPECT_TRUE(std::vector<uint8_t>(out0.begin() + b, out0.end()) == at4)
          << "dtype " << dtype << " op " << op;
    }
  }
}

// A source that never sends: the wait times out, and the error names every
// source of the blocked step.
TEST(ExecutorFanIn, TimeoutNamesEverySource) {
  const uint64_t b = 64;
  std::vector<uint8_t> zeros(b), result(b);
  std::vector<Program> progs = {
      program({{fanIn(StepKind::kRecvReduce, {1, 2}, -1, in(), out(), b, true)}}),
      program({{send(0, in(), b)}}),
      program({{}}),
  };
  std::vector<Buffers> bufs(3);
  for (auto& buf : bufs) buf.input = zeros.data();
  bufs[0].output = result.data();
  try {
    runProgramsOnThreads(progs, bufs, ReduceSpec{groveFloat32, groveSum, 3}, 4 << 10, 0.5);
    ADD_FAILURE() << "a fan-in step with a silent source completed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("from rank 1 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace grove
