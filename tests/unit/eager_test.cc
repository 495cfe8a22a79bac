// Tests of the eager collectives (exec/eager.h) over shared-memory slot
// links, with threads as ranks: every collective, in place and not, several
// data types, ops and rank counts, against a reference folded in rank order
// with the same kernels (so reductions compare bit for bit); slot reuse when
// a root runs ahead; and a mismatched call.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/select/selector.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/wait.h"
#include "exec/eager.h"
#include "ir/step_traits.h"
#include "ir/validate.h"
#include "kernels/cpu/reduce.h"
#include "transports/shm/shm_transport.h"
#include "unit/harness/run_threads.h"
#include "unit/harness/shm_ranks.h"

namespace grove::exec {
namespace {

using plan::Coll;

/// Every message the eager collectives post: (from, to) -> bytes, summed.
struct Traffic {
  std::mutex mu;
  std::map<std::pair<int, int>, uint64_t> bytes;
  void add(int from, int to, uint64_t n) {
    std::lock_guard<std::mutex> lock(mu);
    bytes[{from, to}] += n;
  }
};

/// A slot sender that records what it posts, then posts it.
class RecordingSender final : public transport::SlotSender {
 public:
  RecordingSender(std::unique_ptr<transport::SlotSender> inner, int from, int to, Traffic* log)
      : inner_(std::move(inner)), from_(from), to_(to), log_(log) {}
  size_t maxBytes() const override { return inner_->maxBytes(); }
  void* acquire() override { return inner_->acquire(); }
  void post(size_t n) override {
    log_->add(from_, to_, n);
    inner_->post(n);
  }

 private:
  std::unique_ptr<transport::SlotSender> inner_;
  int from_, to_;
  Traffic* log_;
};

/// Eager collectives of `n` thread ranks over a fresh mesh of slot links
/// (recording every message in `traffic` when given).
std::vector<std::unique_ptr<EagerCollectives>> eagerRanks(int n, size_t maxBytes, int slots,
                                                          const WaitContext& wc, bool tags = true,
                                                          Traffic* traffic = nullptr) {
  const std::string job = harness::uniqueJob("eager");
  std::vector<std::unique_ptr<transport::ShmTransport>> transports;
  for (int r = 0; r < n; ++r)
    transports.push_back(
        std::make_unique<transport::ShmTransport>(harness::shmContext(r, n, job, 4096, wc)));
  std::vector<std::unique_ptr<EagerCollectives>> ranks(n);
  harness::runThreads(n, [&](int r) {
    std::vector<int> peers;
    for (int p = 0; p < n; ++p)
      if (p != r) peers.push_back(p);
    std::vector<std::unique_ptr<transport::SlotSender>> s, sends(n);
    std::vector<std::unique_ptr<transport::SlotReceiver>> q, recvs(n);
    transports[r]->establishSlots(peers, EagerCollectives::slotBytes(maxBytes, tags), slots, s, q);
    for (size_t i = 0; i < peers.size(); ++i) {
      sends[peers[i]] = std::move(s[i]);
      if (traffic != nullptr)
        sends[peers[i]] =
            std::make_unique<RecordingSender>(std::move(sends[peers[i]]), r, peers[i], traffic);
      recvs[peers[i]] = std::move(q[i]);
    }
    ranks[r] = std::make_unique<EagerCollectives>(r, n, maxBytes, tags, std::move(sends),
                                                  std::move(recvs));
  });
  return ranks;
}

/// Element i of rank r's input as `dtype` bytes.
void writeValue(groveDataType_t dtype, int r, size_t i, uint8_t* dst) {
  const float f = static_cast<float>(static_cast<int>((r * 7 + i * 3) % 11) - 5) + 0.375f * r;
  const int64_t k = static_cast<int64_t>(r * 5 + i % 13) - 6;
  switch (dtype) {
    case groveFloat32: std::memcpy(dst, &f, 4); break;
    case groveFloat64: {
      double d = f / 3.0;
      std::memcpy(dst, &d, 8);
      break;
    }
    case groveFloat16: {
      uint16_t h = kernels::floatToHalf(f);
      std::memcpy(dst, &h, 2);
      break;
    }
    case groveBfloat16: {
      uint16_t b = kernels::floatToBf16(f);
      std::memcpy(dst, &b, 2);
      break;
    }
    case groveInt32: {
      int32_t v = static_cast<int32_t>(k);
      std::memcpy(dst, &v, 4);
      break;
    }
    case groveInt8: {
      int8_t v = static_cast<int8_t>(k);
      std::memcpy(dst, &v, 1);
      break;
    }
    default: {
      uint64_t v = static_cast<uint64_t>(k);
      std::memcpy(dst, &v, dtypeSize(dtype));
    }
  }
}

/// `blocks` blocks of rank r's data: block b is the input rank r would send to rank b.
std::vector<uint8_t> inputOf(const plan::CollArgs& a, int r, int blocks) {
  const size_t es = dtypeSize(a.dtype);
  std::vector<uint8_t> v(a.count * blocks * es);
  for (size_t i = 0; i < a.count * blocks; ++i)
    writeValue(a.dtype, r * 3 + static_cast<int>(i / a.count), i, &v[i * es]);
  return v;
}

/// src[0] op src[1] op ... in rank order, as the eager collectives compute it.
std::vector<uint8_t> fold(const plan::CollArgs& a, const std::vector<const uint8_t*>& src) {
  const size_t bytes = a.count * dtypeSize(a.dtype);
  std::vector<uint8_t> out(src[0], src[0] + bytes);
  for (size_t k = 1; k < src.size(); ++k)
    kernels::reduce(a.dtype, a.op, out.data(), nullptr, out.data(), src[k], a.count,
                    k + 1 == src.size(), a.nranks);
  return out;
}

int inBlocks(Coll c, int n) {
  return c == Coll::kReduceScatter || c == Coll::kScatter || c == Coll::kAlltoAll ? n : 1;
}
int outBlocks(Coll c, int n) {
  return c == Coll::kAllGather || c == Coll::kGather || c == Coll::kAlltoAll ? n : 1;
}

/// What rank r's output must be (empty: the output is not written on r).
std::vector<uint8_t> expected(const plan::CollArgs& a, int r,
                              const std::vector<std::vector<uint8_t>>& in) {
  const int n = a.nranks;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  auto blockOf = [&](int rank, int b) { return in[rank].data() + b * bytes; };
  std::vector<const uint8_t*> src;
  std::vector<uint8_t> out;
  switch (a.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      if (a.coll == Coll::kReduce && r != a.root) return {};
      for (int p = 0; p < n; ++p) src.push_back(blockOf(p, 0));
      return fold(a, src);
    case Coll::kReduceScatter:
      for (int p = 0; p < n; ++p) src.push_back(blockOf(p, r));
      return fold(a, src);
    case Coll::kBroadcast: return in[a.root];
    case Coll::kScatter: return {blockOf(a.root, r), blockOf(a.root, r) + bytes};
    case Coll::kAllGather:
    case Coll::kGather:
      if (a.coll == Coll::kGather && r != a.root) return {};
      for (int p = 0; p < n; ++p) out.insert(out.end(), blockOf(p, 0), blockOf(p, 0) + bytes);
      return out;
    case Coll::kAlltoAll:
      for (int p = 0; p < n; ++p) out.insert(out.end(), blockOf(p, r), blockOf(p, r) + bytes);
      return out;
    default: return {};
  }
}

/// Runs `a` (rank and in-place set per rank) on every rank and checks every output.
void checkCollective(std::vector<std::unique_ptr<EagerCollectives>>& ranks, plan::CollArgs a,
                     const WaitContext& wc) {
  const int n = static_cast<int>(ranks.size());
  a.nranks = n;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  std::vector<std::vector<uint8_t>> in(n);
  for (int r = 0; r < n; ++r) in[r] = inputOf(a, r, inBlocks(a.coll, n));
  harness::runThreads(n, [&](int r) {
    plan::CollArgs mine = a;
    mine.rank = r;
    const bool rooted = a.coll == Coll::kReduce || a.coll == Coll::kBroadcast ||
                        a.coll == Coll::kGather || a.coll == Coll::kScatter;
    mine.inPlace = a.inPlace && (!rooted || r == a.root);
    std::vector<uint8_t> inBuf = in[r];
    std::vector<uint8_t> outBuf(bytes * outBlocks(a.coll, n), 0xee);
    const void* input = inBuf.data();
    void* output = outBuf.data();
    const uint8_t* result = outBuf.data();
    if (mine.inPlace) {
      switch (a.coll) {
        case Coll::kAllGather:
        case Coll::kGather:  // the own block sits in place in the output
          std::memcpy(outBuf.data() + r * bytes, inBuf.data(), bytes);
          input = outBuf.data() + r * bytes;
          break;
        case Coll::kReduceScatter:
        case Coll::kScatter:  // the output is the own block of the input
          output = inBuf.data() + r * bytes;
          result = inBuf.data() + r * bytes;
          break;
        default:  // the same buffer
          input = inBuf.data();
          output = inBuf.data();
          result = inBuf.data();
      }
    }
    ranks[r]->run(mine, input, output, wc, 0);
    const std::vector<uint8_t> want = expected(a, r, in);
    const size_t outBytes = bytes * outBlocks(a.coll, n);
    if (want.empty()) {
      EXPECT_EQ(outBuf, std::vector<uint8_t>(outBytes, 0xee)) << "rank " << r << " output written";
      return;
    }
    ASSERT_EQ(want.size(), outBytes);
    EXPECT_EQ(std::memcmp(result, want.data(), outBytes), 0)
        << plan::collName(a.coll) << " " << dtypeName(a.dtype) << " " << opName(a.op) << " count "
        << a.count << " root " << a.root << " in-place " << a.inPlace << " rank " << r << "/" << n;
  });
}

class EagerTest : public ::testing::Test {
 protected:
  AbortSignal abort_;
  WaitContext wc_ = WaitContext::of(abort_, 20.0);
};

TEST_F(EagerTest, EveryCollectiveInPlaceAndNotMatchesTheReference) {
  const Coll colls[] = {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter, Coll::kBroadcast,
                        Coll::kAllGather, Coll::kGather, Coll::kScatter,       Coll::kAlltoAll};
  for (int n : {2, 3, 5}) {
    auto ranks = eagerRanks(n, 512, 4, wc_);
    for (Coll c : colls)
      for (bool inPlace : {false, true})
        for (size_t count : {size_t{1}, size_t{3}, size_t{128}}) {
          plan::CollArgs a;
          a.coll = c;
          a.count = count;
          a.dtype = groveFloat32;
          a.op = groveSum;
          a.root = n - 1;
          a.inPlace = inPlace;
          checkCollective(ranks, a, wc_);
        }
  }
}

// The eager path is the direct algorithm's program carried out over slots
// (plan::eagerProgram): per pair of ranks it posts exactly the bytes that
// program sends, and that program passes the validator and the deadlock
// simulator -- so what they check is what eager calls run.
TEST_F(EagerTest, EveryCallSendsWhatItsProgramSends) {
  const Coll colls[] = {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter, Coll::kBroadcast,
                        Coll::kAllGather, Coll::kGather, Coll::kScatter,       Coll::kAlltoAll};
  for (int n : {2, 3, 5}) {
    Traffic traffic;
    auto ranks = eagerRanks(n, 512, 4, wc_, /*tags=*/false, &traffic);
    for (Coll c : colls)
      for (bool inPlace : {false, true}) {
        plan::CollArgs a;
        a.coll = c;
        a.count = 7;
        a.dtype = groveFloat32;
        a.op = groveSum;
        a.root = 1;
        a.inPlace = inPlace;
        a.nranks = n;
        traffic.bytes.clear();
        checkCollective(ranks, a, wc_);
        std::vector<plan::Program> programs;
        std::map<std::pair<int, int>, uint64_t> planned;
        for (int r = 0; r < n; ++r) {
          plan::CollArgs mine = a;
          mine.rank = r;
          const bool rooted = c == Coll::kReduce || c == Coll::kBroadcast || c == Coll::kGather ||
                              c == Coll::kScatter;
          mine.inPlace = inPlace && (!rooted || r == a.root);
          programs.push_back(plan::eagerProgram(mine));
          for (const plan::Phase& ph : programs.back().phases)
            for (const plan::Lane& lane : ph.lanes)
              for (const plan::Step& st : lane.steps)
                if (plan::stepSends(st.kind))
                  for (int i = 0; i < plan::sendPeerCount(st); ++i)
                    planned[{r, plan::sendPeerAt(st, i)}] += st.bytes;
        }
        EXPECT_EQ(traffic.bytes, planned)
            << plan::collName(c) << " in-place " << inPlace << " on " << n << " ranks";
        plan::ValidateOptions vo;
        vo.elemSize = 4;
        for (int r = 0; r < n; ++r) {
          plan::CollArgs mine = a;
          mine.rank = r;
          vo.sizes.push_back(plan::bufferSizesFor(mine));
        }
        EXPECT_NO_THROW(plan::validatePrograms(programs, vo)) << plan::collName(c);
        plan::SimOptions so;
        so.elemSize = 4;
        EXPECT_NO_THROW(plan::checkDeadlockFree(programs, so)) << plan::collName(c);
      }
  }
}

TEST_F(EagerTest, ReductionsOfEveryTypeAndOpAreBitwiseTheFold) {
  auto ranks = eagerRanks(4, 256, 8, wc_);
  for (groveDataType_t t : {groveFloat32, groveFloat64, groveFloat16, groveBfloat16, groveInt32,
                            groveInt8, groveUint64})
    for (groveRedOp_t op : {groveSum, groveProd, groveMax, groveMin, groveAvg})
      for (Coll c : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce}) {
        plan::CollArgs a;
        a.coll = c;
        a.count = 256 / dtypeSize(t) / 2 + 1;
        a.dtype = t;
        a.op = op;
        a.root = 2;
        a.inPlace = true;  // the rank-order fold must not read an own block it overwrote
        checkCollective(ranks, a, wc_);
      }
}

TEST_F(EagerTest, RootsRunAheadThroughEverySlotManyTimes) {
  auto ranks = eagerRanks(3, 64, 2, wc_);
  constexpr int kCalls = 300;  // 150 times round two slots
  harness::runThreads(3, [&](int r) {
    for (int i = 0; i < kCalls; ++i) {
      plan::CollArgs a;
      a.coll = Coll::kBroadcast;
      a.count = 2;
      a.dtype = groveInt32;
      a.root = i % 3 == 2 ? 1 : 0;  // mostly rank 0, which runs ahead of the others
      a.rank = r;
      a.nranks = 3;
      int32_t in[2] = {i, -i}, out[2] = {0, 0};
      ranks[r]->run(a, in, out, wc_, static_cast<uint8_t>(i));  // numbers wrap past 255
      ASSERT_EQ(out[0], i) << "call " << i << " rank " << r;
      ASSERT_EQ(out[1], -i);
    }
  });
}

/// Runs a 2-rank eager call with rank r's arguments from `argsOf`; returns each rank's error.
/// (`seqOf(r)`: rank r's collective number.)
template <typename ArgsOf>
std::vector<std::string> mismatchErrors(
    std::vector<std::unique_ptr<EagerCollectives>>& ranks, const WaitContext& wc, ArgsOf argsOf,
    const std::function<uint8_t(int)>& seqOf = [](int) { return uint8_t{0}; }) {
  std::vector<std::string> errors(2);
  harness::runThreads(2, [&](int r) {
    plan::CollArgs a = argsOf(r);
    a.rank = r;
    a.nranks = 2;
    float in[16] = {}, out[16] = {};
    try {
      ranks[r]->run(a, in, out, wc, seqOf(r));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveInvalidUsage);
      errors[r] = e.what();
    }
  });
  return errors;
}

TEST_F(EagerTest, AMismatchedCountIsAClearError) {
  auto untagged = eagerRanks(2, 64, 4, wc_, /*tags=*/false);
  auto count = [](int r) {
    plan::CollArgs a;
    a.count = r == 0 ? 4 : 5;
    return a;
  };
  for (const std::string& e : mismatchErrors(untagged, wc_, count))
    EXPECT_NE(e.find("called different collectives, counts or types"), std::string::npos) << e;
  auto tagged = eagerRanks(2, 64, 4, wc_);
  for (const std::string& e : mismatchErrors(tagged, wc_, count))
    EXPECT_NE(e.find("call mismatch: rank "), std::string::npos) << e;
}

// The same call from another of the sender's collectives: bytes an earlier
// call left behind (ranks that named different roots both only sent), not
// this call's.
TEST_F(EagerTest, TagsCatchTheSameCallOfAnotherNumber) {
  auto ranks = eagerRanks(2, 64, 4, wc_);
  auto same = [](int) {
    plan::CollArgs a;
    a.count = 4;
    return a;
  };
  std::vector<std::string> errors =
      mismatchErrors(ranks, wc_, same, [](int r) { return static_cast<uint8_t>(r == 0 ? 7 : 8); });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[r].find("call out of step: rank " + std::to_string(1 - r) +
                             " sent these bytes in allreduce(count 4, float, sum), its "
                             "collective #" +
                             std::to_string(r == 0 ? 8 : 7)),
              std::string::npos)
        << errors[r];
}

// Same block size, another meaning: only the tags tell.
TEST_F(EagerTest, TagsCatchAnotherOpOrTypeOfTheSameSize) {
  auto ranks = eagerRanks(2, 64, 4, wc_);
  auto op = [](int r) {
    plan::CollArgs a;
    a.count = 4;
    a.op = r == 0 ? groveSum : groveMax;
    return a;
  };
  std::vector<std::string> errors = mismatchErrors(ranks, wc_, op);
  EXPECT_NE(errors[0].find("rank 1 runs allreduce(count 4, float, max) while rank 0 runs "
                           "allreduce(count 4, float, sum)"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 0 runs allreduce(count 4, float, sum)"), std::string::npos)
      << errors[1];
  auto fresh = eagerRanks(2, 64, 4, wc_);
  auto type = [](int r) {
    plan::CollArgs a;
    a.count = 4;
    a.dtype = r == 0 ? groveFloat32 : groveInt32;
    return a;
  };
  for (const std::string& e : mismatchErrors(fresh, wc_, type))
    EXPECT_NE(e.find("int32"), std::string::npos) << e;
}

}  // namespace
}  // namespace grove::exec
