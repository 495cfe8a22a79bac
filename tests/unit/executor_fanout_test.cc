// Host executor, fan-out steps: a step that sends the same bytes to
// several destinations, over loopback rings and over the socket transport
// (its direct sends and receives), with a destination that takes its bytes
// late.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "exec/host_executor.h"
#include "unit/harness/run_threads.h"
#include "unit/harness/socket_job.h"
#include "unit/harness/thread_ranks.h"
#include "unit/ir_steps.h"

namespace grove {
namespace {

using namespace plan::testing;
using exec::Buffers;
using exec::ReduceSpec;
using harness::runProgramsOnThreads;
using plan::Program;
using plan::Step;
using plan::StepKind;

// 0 -> {1, 2, 3} in one step, 1 -> {4, 5} forwarding, through small rings
// (every step wraps many times), then an odd-sized second step whose start
// is padded differently on every link: every receiver gets the bytes intact.
TEST(Executor, FanOutBroadcastStreamsToEveryDestination) {
  const size_t n = (1 << 20) + 13, m = 37;
  auto data = pattern(n + m, 7);
  for (size_t ring : {size_t{4} << 10, size_t{64} << 10}) {
    std::vector<std::vector<uint8_t>> outs(6, std::vector<uint8_t>(n + m));
    std::vector<Program> progs = {
        program({{{fanOut(send(1, in(), n), {2, 3}), fanOut(send(1, in(n), m), {2, 3})}}}),
        program({{{fanOut(fused(StepKind::kRecvCopySend, 0, 4, {}, out(), n), {5}),
                   fanOut(fused(StepKind::kRecvCopySend, 0, 4, {}, out(n), m), {5})}}}),
    };
    for (int from : {0, 0, 1, 1})  // ranks 2, 3 (from 0) and 4, 5 (from 1)
      progs.push_back(program({{{recv(from, out(), n), recv(from, out(n), m)}}}));
    std::vector<Buffers> bufs(6);
    bufs[0].input = data.data();
    for (int r = 1; r < 6; ++r) bufs[r].output = outs[r].data();
    runProgramsOnThreads(progs, bufs, ReduceSpec{groveUint8, groveSum, 6}, ring, 20.0);
    for (int r = 1; r < 6; ++r) EXPECT_TRUE(outs[r] == data) << "rank " << r << " ring " << ring;
  }
}

/// 0 sends n bytes to 1, which forwards them to 2 and 3 in one fan-out
/// step; 3 takes them only after 2 has had all of its own (2 then sends 3
/// a token of `token` bytes from its input, which 3 receives past n).
std::vector<Program> forwardToARankThatWaits(size_t n, size_t token) {
  return {
      program({{{send(1, in(), n)}}}),
      program({{{fanOut(fused(StepKind::kRecvCopySend, 0, 2, {}, out(), n), {3})}}}),
      program({{{recv(1, out(), n)}}, {{send(3, in(), token)}}}),
      program({{{recv(2, out(n), token)}}, {{recv(1, out(), n)}}}),
  };
}

// A fan-out's destinations go at their own pace: rank 2 takes rank 0's
// bytes only after rank 1 has had all of its own (a token from 1 says so),
// so if the destinations advanced together, 0 would stop once 2's small
// ring is full, 1 would never have everything, and the program would hang.
// The same through a forward (rank 1 of the second program forwards what 0
// sends it to 2 and 3, and 3 waits for 2).
TEST(Executor, FanOutDestinationsGoAtTheirOwnPace) {
  const size_t n = (1 << 20) + 5, token = 16;
  auto data = pattern(n, 3);
  std::vector<uint8_t> mark(token, 9);
  struct Case {
    std::vector<Program> progs;
    int marker;  // the rank that sends the token
  };
  const std::vector<Case> cases = {
      {{program({{{fanOut(send(1, in(), n), {2})}}}),
        program({{{recv(0, out(), n)}}, {{send(2, in(), token)}}}),
        program({{{recv(1, out(n), token)}}, {{recv(0, out(), n)}}})},
       1},
      {forwardToARankThatWaits(n, token), 2},
  };
  for (const Case& c : cases) {
    const int nranks = static_cast<int>(c.progs.size());
    std::vector<std::vector<uint8_t>> outs(nranks, std::vector<uint8_t>(n + token));
    std::vector<Buffers> bufs(nranks);
    bufs[0].input = data.data();
    bufs[c.marker].input = mark.data();
    for (int r = 1; r < nranks; ++r) bufs[r].output = outs[r].data();
    runProgramsOnThreads(c.progs, bufs, ReduceSpec{groveUint8, groveSum, nranks}, 4 << 10, 10.0);
    for (int r = 1; r < nranks; ++r)
      EXPECT_TRUE(std::equal(data.begin(), data.end(), outs[r].begin()))
          << nranks << " ranks, rank " << r;
  }
}

/// Runs programs[r] on rank r's thread over TCP on 127.0.0.1 (the socket
/// transport, whose halves send and receive directly): the paths the
/// loopback rings never take. A failing rank stops the others at once.
void runProgramsOverSockets(const std::vector<Program>& progs, const std::vector<Buffers>& bufs,
                            const ReduceSpec& spec) {
  const int n = static_cast<int>(progs.size());
  harness::SocketJob job(n, 64 << 10, /*timeout=*/5.0);
  std::vector<exec::MapLinkTable> tables(n);  // links close once every rank is done
  harness::runThreads(n, [&](int r) {
    try {
      std::vector<transport::LinkKey> sendKeys, recvKeys;
      exec::collectLinks(progs[r], sendKeys, recvKeys);
      std::vector<std::unique_ptr<transport::SendHalf>> sends;
      std::vector<std::unique_ptr<transport::RecvHalf>> recvs;
      job.transports[r]->establish(sendKeys, recvKeys, sends, recvs);
      for (size_t i = 0; i < sendKeys.size(); ++i)
        tables[r].addSend(sendKeys[i], std::move(sends[i]));
      for (size_t i = 0; i < recvKeys.size(); ++i)
        tables[r].addRecv(recvKeys[i], std::move(recvs[i]));
      exec::runProgram(progs[r], bufs[r], spec, tables[r], WaitContext::of(job.signals[r], 5.0));
    } catch (const std::exception& e) {
      for (AbortSignal& s : job.signals) s.raise(e.what());
      throw;
    }
  });
}

// The own-pace forward over sockets, of floats: rank 1 receives straight
// into dst, in pieces TCP cuts anywhere inside an element, and waits while
// rank 3 does not read yet (so the wait's peek takes arriving bytes into
// the link's buffer): each piece goes on from wherever the last one ended,
// to the last byte. Rounding them to whole elements there left the step's
// last bytes behind, and it timed out in about one run in three (the wait
// must catch bytes arriving): five runs.
TEST(Executor, FanOutForwardOverSocketsTakesPiecesCutInsideElements) {
  const size_t n = (24 << 20) + 4, token = 16;
  auto data = pattern(n, 5);
  std::vector<uint8_t> mark(token, 9);
  const std::vector<Program> progs = forwardToARankThatWaits(n, token);
  std::vector<std::vector<uint8_t>> outs(4, std::vector<uint8_t>(n + token));
  std::vector<Buffers> bufs(4);
  bufs[0].input = data.data();
  bufs[2].input = mark.data();
  for (int r = 1; r < 4; ++r) bufs[r].output = outs[r].data();
  for (int run = 0; run < 5; ++run) {
    for (auto& o : outs) std::fill(o.begin(), o.end(), 0);
    runProgramsOverSockets(progs, bufs, ReduceSpec{groveFloat32, groveSum, 4});
    for (int r = 1; r < 4; ++r)
      ASSERT_TRUE(std::equal(data.begin(), data.end(), outs[r].begin()))
          << "run " << run << ", rank " << r;
  }
}

// Fused kinds fan out too: 1 reduces and sends to {2, 3} (keeping a copy),
// 2 reduces and sends to {0, 3} without keeping one.
TEST(Executor, FanOutOfFusedReductions) {
  const size_t count = 300007, n = count * sizeof(float);
  std::vector<std::vector<float>> data(4, std::vector<float>(count));
  for (int r = 0; r < 4; ++r)
    for (size_t i = 0; i < count; ++i) data[r][i] = static_cast<float>((i * (r + 3)) % 1000);
  std::vector<float> out0(count), out1(count), out3(2 * count);
  std::vector<Program> progs = {
      program({{{send(1, in(), n)}, {recv(2, out(), n)}}}),  // a cycle: needs two lanes
      program({{{fanOut(fused(StepKind::kRecvReduceCopySend, 0, 2, in(), out(), n), {3})}}}),
      program({{{fanOut(fused(StepKind::kRecvReduceSend, 1, 0, in(), {}, n), {3})}}}),
      program({{{recv(1, out(), n)}, {recv(2, out(n), n)}}}),
  };
  std::vector<Buffers> bufs(4);
  for (int r = 0; r < 4; ++r) bufs[r].input = data[r].data();
  bufs[0].output = out0.data();
  bufs[1].output = out1.data();
  bufs[3].output = out3.data();
  runProgramsOnThreads(progs, bufs, ReduceSpec{groveFloat32, groveSum, 4}, 16 << 10, 20.0);
  for (size_t i = 0; i < count; ++i) {
    const float two = data[0][i] + data[1][i], three = two + data[2][i];
    ASSERT_EQ(out1[i], two) << i;
    ASSERT_EQ(out3[i], two) << i;
    ASSERT_EQ(out0[i], three) << i;
    ASSERT_EQ(out3[count + i], three) << i;
  }
}

}  // namespace
}  // namespace grove
