// Host executor over the loopback transport: hand-written programs
// (tests/unit/ir_steps.h) on 2-4 thread ranks
// (tests/unit/harness/thread_ranks.h), checking streaming, fused steps,
// the 16-byte wire rule, extra buffers, zero-byte steps, timeouts, aborts
// and the executor's own checks. Fan-out steps: executor_fanout_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "exec/host_executor.h"
#include "kernels/cpu/reduce.h"
#include "unit/harness/thread_ranks.h"
#include "unit/ir_steps.h"

namespace grove {
namespace {

using namespace plan::testing;
using exec::Buffers;
using exec::ReduceSpec;
using harness::runOnThreadRanks;
using harness::runProgramsOnThreads;
using harness::ThreadRank;
using plan::Buf;
using plan::BufRef;
using plan::Program;
using plan::Step;
using plan::StepKind;

// ------------------------------------------------------------ streaming

TEST(Executor, ChainPassOf5MiBStreamsThrough64KiBBuffers) {
  const size_t n = 5 << 20;
  auto data = pattern(n, 1);
  std::vector<uint8_t> out1(n), out2(n);
  std::vector<Program> progs = {
      program({{{send(1, in(), n)}}}),
      program({{{fused(StepKind::kRecvCopySend, 0, 2, {}, out(), n)}}}),
      program({{{recv(1, out(), n)}}}),
  };
  std::vector<Buffers> bufs(3);
  bufs[0].input = data.data();
  bufs[1].output = out1.data();
  bufs[2].output = out2.data();
  runProgramsOnThreads(progs, bufs, ReduceSpec{groveUint8, groveSum, 3}, 64 << 10, 20.0);
  EXPECT_TRUE(out1 == data);
  EXPECT_TRUE(out2 == data);
}

// Every rank sends 5 MiB to the next and receives from the previous in two
// lanes of one phase: only concurrent lanes in one thread avoid deadlock.
TEST(Executor, RingExchangeNeedsConcurrentLanes) {
  const int nranks = 4;
  const size_t n = (5 << 20) + 4;
  std::vector<std::vector<uint8_t>> inputs, outputs(nranks, std::vector<uint8_t>(n));
  std::vector<Program> progs;
  std::vector<Buffers> bufs(nranks);
  for (int r = 0; r < nranks; ++r) inputs.push_back(pattern(n, 10 + r));
  for (int r = 0; r < nranks; ++r) {
    int next = (r + 1) % nranks, prev = (r + nranks - 1) % nranks;
    progs.push_back(program({{{send(next, in(), n)}, {recv(prev, out(), n)}}}));
    bufs[r].input = inputs[r].data();
    bufs[r].output = outputs[r].data();
  }
  runProgramsOnThreads(progs, bufs, ReduceSpec{groveFloat32, groveSum, nranks}, 64 << 10, 20.0);
  for (int r = 0; r < nranks; ++r) {
    EXPECT_TRUE(outputs[r] == inputs[(r + nranks - 1) % nranks]) << "rank " << r;
  }
}

// ------------------------------------------------------------ fused reduce steps

// Reduce 0 -> 1 -> 2 (kSend, kRecvReduceSend, kRecvReduceCopySend), then
// broadcast 2 -> 1 -> 0 (kRecvCopySend, kRecv), chunked, with the two
// directions in concurrent lanes on ranks 0 and 1.
template <class T>
void ringReduce(groveDataType_t dtype, groveRedOp_t op, size_t count, bool inPlace, int ch) {
  const size_t chunkElems = 3000;
  std::vector<std::vector<T>> ins(3, std::vector<T>(count)), outs(3, std::vector<T>(count));
  for (int r = 0; r < 3; ++r) {
    for (size_t i = 0; i < count; ++i) ins[r][i] = static_cast<T>((i * 7 + r * 13) % 50 + r);
  }
  std::vector<T> want(count);
  for (size_t i = 0; i < count; ++i) {
    T s01, s;
    kernels::reduce(dtype, op, &s01, nullptr, &ins[1][i], &ins[0][i], 1, false, 3);
    kernels::reduce(dtype, op, &s, nullptr, &ins[2][i], &s01, 1, true, 3);
    want[i] = s;
  }
  std::vector<std::vector<Step>> up(3), down(3);
  for (size_t c = 0; c < count; c += chunkElems) {
    size_t e = std::min(chunkElems, count - c);
    uint64_t off = c * sizeof(T), bytes = e * sizeof(T);
    up[0].push_back(send(1, in(off), bytes, ch));
    up[1].push_back(fused(StepKind::kRecvReduceSend, 0, 2, in(off), {}, bytes, ch));
    BufRef src2 = inPlace ? out(off) : in(off);
    up[2].push_back(fused(StepKind::kRecvReduceCopySend, 1, 1, src2, out(off), bytes, ch, true));
    down[1].push_back(fused(StepKind::kRecvCopySend, 2, 0, {}, out(off), bytes, ch));
    down[0].push_back(recv(1, out(off), bytes, ch));
  }
  std::vector<Program> progs = {program({{up[0], down[0]}}), program({{up[1], down[1]}}),
                                program({{up[2]}})};
  std::vector<Buffers> bufs(3);
  for (int r = 0; r < 3; ++r) {
    bufs[r].input = ins[r].data();
    bufs[r].output = outs[r].data();
  }
  if (inPlace) {
    outs[2] = ins[2];
    bufs[2].input = outs[2].data();
  }
  runProgramsOnThreads(progs, bufs, ReduceSpec{dtype, op, 3}, 16 << 10, 20.0);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(std::memcmp(outs[r].data(), want.data(), count * sizeof(T)), 0)
        << "rank " << r << " " << dtypeName(dtype) << " " << opName(op);
  }
}

TEST(Executor, ThreeRankRingReduceWithFusedSteps) {
  ringReduce<float>(groveFloat32, groveSum, 100003, false, 0);
  ringReduce<float>(groveFloat32, groveAvg, 50001, true, 1);
  ringReduce<int32_t>(groveInt32, groveMax, 77777, false, 0);
  ringReduce<int64_t>(groveInt64, groveAvg, 9999, false, 2);
  ringReduce<uint8_t>(groveUint8, groveProd, 100001, true, 0);
  ringReduce<double>(groveFloat64, groveMin, 12345, false, 0);
  ringReduce<uint16_t>(groveFloat16, groveSum, 3001, false, 0);
}

// ------------------------------------------------------------ the wire rule

// Odd-sized int8 steps then float steps of another program on the same
// links, through a 64-byte ring (every step wraps): data arrives intact and
// both sides' positions follow the 16-byte rule.
TEST(Executor, PaddingAcrossStepsAndProgramsOfDifferentTypes) {
  const std::vector<uint64_t> byteSizes = {1, 7, 13, 0, 33, 16, 5, 64, 3};
  const std::vector<uint64_t> floatCounts = {1, 3, 5, 16, 2};
  uint64_t totalBytes = std::accumulate(byteSizes.begin(), byteSizes.end(), uint64_t{0});
  uint64_t totalFloats = std::accumulate(floatCounts.begin(), floatCounts.end(), uint64_t{0});
  auto bytesIn = pattern(totalBytes, 5);
  std::vector<float> floatsIn(totalFloats), acc(totalFloats, 0.5f);
  for (size_t i = 0; i < totalFloats; ++i) floatsIn[i] = static_cast<float>(i) * 1.25f;
  std::vector<uint8_t> bytesOut(totalBytes);
  std::vector<float> floatsOut(totalFloats);

  Program sendBytes, recvBytes, sendFloats, recvFloats;
  {
    std::vector<Step> s, r;
    uint64_t off = 0;
    for (uint64_t b : byteSizes) {
      s.push_back(send(1, in(off), b));
      r.push_back(recv(0, out(off), b));
      off += b;
    }
    sendBytes = program({{s}});
    recvBytes = program({{r}});
  }
  {
    std::vector<Step> s, r;
    uint64_t off = 0;
    for (uint64_t c : floatCounts) {
      s.push_back(send(1, in(off), c * 4));
      r.push_back(recv(0, out(off), c * 4));  // plain copy ...
      r.push_back(fused(StepKind::kRecvReduce, 0, -1, extra(0, off), extra(0, off), 0));
      off += c * 4;
    }
    // ... and the same floats again, reduced into extra[0] on arrival.
    off = 0;
    for (uint64_t c : floatCounts) {
      s.push_back(send(1, in(off), c * 4));
      r.push_back(fused(StepKind::kRecvReduce, 0, -1, extra(0, off), extra(0, off), c * 4));
      off += c * 4;
    }
    sendFloats = program({{s}});
    recvFloats = program({{r}});
  }
  uint64_t wantPos = 0;
  for (uint64_t b : byteSizes) wantPos = b == 0 ? wantPos : align16(wantPos) + b;
  uint64_t afterBytes = wantPos;
  for (int twice = 0; twice < 2; ++twice) {
    for (uint64_t c : floatCounts) wantPos = align16(wantPos) + c * 4;
  }

  harness::ThreadRanksOptions opts;
  opts.bufferBytes = 64;
  opts.timeoutSec = 10;
  runOnThreadRanks(2, opts, [&](ThreadRank& rank) {
    Buffers b;
    if (rank.rank() == 0) {
      b.input = bytesIn.data();
      rank.run(sendBytes, b, ReduceSpec{groveInt8, groveSum, 2});
      EXPECT_EQ(rank.links().sendLink({1, 0}).position, afterBytes);
      b.input = floatsIn.data();
      rank.run(sendFloats, b, ReduceSpec{groveFloat32, groveSum, 2});
      EXPECT_EQ(rank.links().sendLink({1, 0}).position, wantPos);
    } else {
      b.output = bytesOut.data();
      rank.run(recvBytes, b, ReduceSpec{groveInt8, groveSum, 2});
      EXPECT_EQ(rank.links().recvLink({0, 0}).position, afterBytes);
      b.output = floatsOut.data();
      b.extra = {acc.data()};
      rank.run(recvFloats, b, ReduceSpec{groveFloat32, groveSum, 2});
      EXPECT_EQ(rank.links().recvLink({0, 0}).position, wantPos);
    }
  });
  EXPECT_TRUE(bytesOut == bytesIn);
  EXPECT_TRUE(floatsOut == floatsIn);
  for (size_t i = 0; i < totalFloats; ++i) EXPECT_EQ(acc[i], floatsIn[i] + 0.5f) << i;
}

// Random sequences of odd-sized steps of changing element sizes, both
// directions at once, through rings of 64..256 bytes, over many programs.
TEST(Executor, RandomStepSequencesOverTinyRings) {
  const groveDataType_t types[] = {groveInt8, groveFloat16, groveFloat32, groveFloat64};
  for (uint32_t seed = 0; seed < 12; ++seed) {
    std::mt19937 rng(seed);
    struct Prog {
      groveDataType_t dtype;
      std::vector<uint64_t> sizes[2];  // bytes of each step sent by rank r
    };
    std::vector<Prog> progs(6);
    for (auto& p : progs) {
      p.dtype = types[rng() % 4];
      size_t esz = dtypeSize(p.dtype);
      for (auto& v : p.sizes) {
        for (int i = 0, n = 1 + rng() % 6; i < n; ++i) v.push_back(esz * (rng() % 40));
      }
    }
    harness::ThreadRanksOptions opts;
    opts.bufferBytes = 64 * (1 + seed % 4);
    runOnThreadRanks(2, opts, [&](ThreadRank& rank) {
      int me = rank.rank(), peer = 1 - me;
      for (size_t k = 0; k < progs.size(); ++k) {
        const Prog& p = progs[k];
        uint64_t sendTotal = 0, recvTotal = 0;
        for (uint64_t b : p.sizes[me]) sendTotal += b;
        for (uint64_t b : p.sizes[peer]) recvTotal += b;
        auto data = pattern(sendTotal, seed * 100 + k * 2 + me);
        auto want = pattern(recvTotal, seed * 100 + k * 2 + peer);
        std::vector<uint8_t> got(recvTotal), acc(recvTotal, 0);
        std::vector<Step> sends, recvs;
        uint64_t off = 0;
        for (uint64_t b : p.sizes[me]) {
          sends.push_back(send(peer, in(off), b));
          off += b;
        }
        off = 0;
        for (uint64_t b : p.sizes[peer]) {
          // int8: reduce (sum into zeros = copy) on arrival; other types: plain receive.
          if (p.dtype == groveInt8) {
            recvs.push_back(fused(StepKind::kRecvReduce, peer, -1, extra(0, off), out(off), b));
          } else {
            recvs.push_back(recv(peer, out(off), b));
          }
          off += b;
        }
        Buffers bufs;
        bufs.input = data.data();
        bufs.output = got.data();
        bufs.extra = {acc.data()};
        rank.run(program({{sends, recvs}}), bufs, ReduceSpec{p.dtype, groveSum, 2});
        ASSERT_TRUE(got == want) << "seed " << seed << " program " << k << " rank " << me;
      }
    });
  }
}

TEST(Executor, ZeroByteStepsAreNoOpsWithoutPadding) {
  std::vector<uint8_t> src = pattern(5, 9), dst(5);
  runOnThreadRanks(2, {}, [&](ThreadRank& rank) {
    Buffers b;
    if (rank.rank() == 0) {
      b.input = src.data();
      rank.run(program({{{send(1, in(), 5), send(1, in(), 0)}}, {{send(1, in(), 0)}}}), b,
               ReduceSpec{groveInt8, groveSum, 2});
      EXPECT_EQ(rank.links().sendLink({1, 0}).position, 5u);
    } else {
      b.output = dst.data();
      rank.run(program({{{recv(0, out(), 5), recv(0, out(), 0)}}, {{recv(0, out(), 0)}}}), b,
               ReduceSpec{groveInt8, groveSum, 2});
      EXPECT_EQ(rank.links().recvLink({0, 0}).position, 5u);
    }
  });
  EXPECT_TRUE(dst == src);
}

// ------------------------------------------------------------ buffers and local steps

TEST(Executor, ExtraBuffersForGroupedSendRecv) {
  // Rank 0 sends extra[0] to 1 and extra[1] to 2; ranks 1 and 2 each send one
  // back into rank 0's extra[2] / extra[3]. All in one phase, one lane per peer.
  auto a = pattern(1000, 1), b = pattern(3001, 2), c = pattern(17, 3), d = pattern(4096, 4);
  std::vector<uint8_t> got1(1000), got2(3001), got3(17), got4(4096);
  std::vector<Program> progs = {
      program({{{send(1, extra(0), 1000), recv(1, extra(2), 17)},
                {send(2, extra(1), 3001), recv(2, extra(3), 4096)}}}),
      program({{{recv(0, extra(5), 1000), send(0, extra(1), 17)}}}),
      program({{{send(0, extra(0), 4096)}, {recv(0, extra(1), 3001)}}}),
  };
  std::vector<Buffers> bufs(3);
  bufs[0].extra = {a.data(), b.data(), got3.data(), got4.data()};
  bufs[1].extra = {nullptr, c.data(), nullptr, nullptr, nullptr, got1.data()};
  bufs[2].extra = {d.data(), got2.data()};
  runProgramsOnThreads(progs, bufs, ReduceSpec{groveUint8, groveSum, 3});
  EXPECT_TRUE(got1 == a);
  EXPECT_TRUE(got2 == b);
  EXPECT_TRUE(got3 == c);
  EXPECT_TRUE(got4 == d);
}

TEST(Executor, LocalCopyAndReduceSteps) {
  const size_t n = 300000;  // floats: > the executor's local piece size
  std::vector<float> input(n), output(n, 2.0f), scratchBuf(n + 8);
  for (size_t i = 0; i < n; ++i) input[i] = static_cast<float>(i % 1000);
  Program p = program({{{local(StepKind::kCopy, in(), scratch(16), n * 4),
                         local(StepKind::kReduce, scratch(16), out(), n * 4, true),
                         // overlapping copy inside scratch: memmove semantics
                         local(StepKind::kCopy, scratch(16), scratch(0), n * 4)}}},
                      (n + 4) * 4);
  Buffers b;
  b.input = input.data();
  b.output = output.data();
  b.scratch = scratchBuf.data();
  harness::runProgramsOnThreads({p}, {b}, ReduceSpec{groveFloat32, groveAvg, 2});
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(output[i], (2.0f + input[i]) / 2) << i;
    ASSERT_EQ(scratchBuf[i], input[i]) << i;
  }
}

// ------------------------------------------------------------ failures

TEST(Executor, ReceiveThatNobodySendsTimesOut) {
  std::vector<uint8_t> dst(64);
  std::vector<Program> progs = {program({}), program({{{recv(0, out(), 64)}}})};
  std::vector<Buffers> bufs(2);
  bufs[1].output = dst.data();
  auto t0 = std::chrono::steady_clock::now();
  try {
    runProgramsOnThreads(progs, bufs, ReduceSpec{groveUint8, groveSum, 2}, 4096, 0.5);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveRemoteError);
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("recv 0/64 B from rank 0"), std::string::npos) << e.what();
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0);
}

TEST(Executor, AbortFromAnotherThreadStopsTheWait) {
  std::vector<uint8_t> dst(64);
  std::vector<Program> progs = {program({}), program({{{recv(0, out(), 64)}}})};
  std::vector<Buffers> bufs(2);
  bufs[1].output = dst.data();
  AbortSignal signal;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    signal.raise("test abort");
  });
  auto t0 = std::chrono::steady_clock::now();
  try {
    runProgramsOnThreads(progs, bufs, ReduceSpec{groveUint8, groveSum, 2}, 4096, 60.0, &signal);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveRemoteError);
    EXPECT_NE(std::string(e.what()).find("test abort"), std::string::npos) << e.what();
  }
  aborter.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
}

TEST(Executor, RejectsBadPrograms) {
  std::vector<uint8_t> buf(64);
  auto runOne = [&](const Program& p, Buffers b) {
    exec::MapLinkTable links;
    AbortSignal sig;
    WaitContext wait = WaitContext::of(sig, 1.0);
    exec::runProgram(p, b, ReduceSpec{groveFloat32, groveSum, 2}, links, wait);
  };
  Buffers b;
  b.input = buf.data();
  b.output = buf.data();
  auto code = [&](const Program& p, Buffers bb) {
    try {
      runOne(p, bb);
    } catch (const Error& e) {
      return e.code();
    }
    return groveSuccess;
  };
  EXPECT_EQ(code(program({{{local(StepKind::kCopy, out(), in(), 16)}}}), b), groveInternalError);
  EXPECT_EQ(code(program({{{send(1, in(), 16)}}}), b), groveInternalError);  // no link
  EXPECT_EQ(code(program({{{local(StepKind::kCopy, extra(2), out(), 16)}}}), b),
            groveInvalidArgument);
  EXPECT_EQ(code(program({{{local(StepKind::kCopy, in(), scratch(8), 16)}}}, 16), b),
            groveInternalError);  // past the scratch buffer
  EXPECT_EQ(code(program({{{local(StepKind::kReduce, in(), out(), 6)}}}), b),
            groveInternalError);  // not whole elements
  EXPECT_EQ(code(program({{{local(StepKind::kCopy, in(), out(), 0)}}}), b), groveSuccess);
  EXPECT_EQ(code(program({{{local(StepKind::kCopy, in(), scratch(), 8)}}}, 8), b),
            groveInvalidArgument);  // scratch pointer not bound
  // Two lanes of one phase on one stream.
  EXPECT_THROW(runOnThreadRanks(2, {},
                                [&](ThreadRank& rank) {
                                  Buffers bb;
                                  bb.input = buf.data();
                                  bb.output = buf.data();
                                  if (rank.rank() == 0) {
                                    rank.run(program({{{send(1, in(), 8)}, {send(1, in(), 8)}}}),
                                             bb, ReduceSpec{groveInt8, groveSum, 2});
                                  }
                                }),
               Error);
}

TEST(Executor, CollectLinksSortsAndDeduplicates) {
  Program p = program(
      {{{send(3, in(), 8), send(1, in(), 8, 1), fanOut(send(1, in(), 8), {5, 3})},
        {fused(StepKind::kRecvReduceSend, 2, 3, in(), {}, 8)}},
       {{recv(2, out(), 8), recv(0, out(), 0, 2), local(StepKind::kCopy, in(), out(), 8)}}});
  std::vector<transport::LinkKey> sends, recvs;
  exec::collectLinks(p, sends, recvs);
  std::vector<transport::LinkKey> wantSends = {{1, 0}, {1, 1}, {3, 0}, {5, 0}};
  std::vector<transport::LinkKey> wantRecvs = {{0, 2}, {2, 0}};
  EXPECT_EQ(sends, wantSends);
  EXPECT_EQ(recvs, wantRecvs);
}

}  // namespace
}  // namespace grove
