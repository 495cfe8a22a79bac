// The selector (thresholds, overrides, fallback, the registry, eager, its
// tree / hier / size-table handling) and the algorithm table every reader
// of algorithms iterates.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/select/algorithm_table.h"
#include "algorithms/select/selector.h"
#include "base/config.h"
#include "base/error.h"
#include "unit/link_presets.h"

namespace grove::plan {
namespace {

// ------------------------------------------------------------------ selector

SelectorConfig cfg(const std::string& algo = "") {
  SelectorConfig c;
  c.algo = algo;
  return c;
}

TEST(Selector, DefaultThresholds) {
  Selector s(4, presets::linkTraits("shm"), cfg());
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
  EXPECT_EQ(Selector(4, presets::linkTraits("socket"), cfg()).params().nChannels, 2);
}

// On GPU lanes automatic channels grow with the message, one per 512 KiB up
// to 32; a channel count the user set stays as set, and host lanes keep theirs.
TEST(Selector, GpuLanesScaleChannelsWithTheMessage) {
  SelectorConfig c = cfg();
  c.gpuLanes = true;
  Selector gpu(2, presets::linkTraits("shm"), c);
  EXPECT_EQ(gpu.select(Coll::kAllReduce, 8).params.nChannels, 1);
  EXPECT_EQ(gpu.select(Coll::kAllReduce, 1 << 20).params.nChannels, 2);
  EXPECT_EQ(gpu.select(Coll::kAllReduce, 4 << 20).params.nChannels, 8);
  EXPECT_EQ(gpu.select(Coll::kBroadcast, 16 << 20).params.nChannels, 32);
  EXPECT_EQ(gpu.select(Coll::kAllGather, uint64_t{1} << 30).params.nChannels, 32);
  c.nChannels = 3;
  const Selector set(2, presets::linkTraits("shm"), c), host(2, presets::linkTraits("shm"), cfg());
  EXPECT_EQ(set.select(Coll::kAllReduce, 1 << 30).params.nChannels, 3);
  EXPECT_EQ(host.select(Coll::kAllReduce, 1 << 30).params.nChannels, 1);
  // Exchanges: as many channels on a GPU, one on the host (even over sockets).
  EXPECT_EQ(gpu.select(Coll::kGather, 64 << 20).params.nChannels, 32);
  EXPECT_EQ(gpu.select(Coll::kAlltoAll, 2 << 20).params.nChannels, 4);
  const Selector tcp(4, presets::linkTraits("socket"), cfg());
  EXPECT_EQ(tcp.select(Coll::kAllGather, 64 << 20).params.nChannels, 2);
  for (Coll coll : {Coll::kGather, Coll::kScatter, Coll::kAlltoAll})
    EXPECT_EQ(tcp.select(coll, 64 << 20).params.nChannels, 1) << collName(coll);
}

// Send/recv groups split long ops only on a GPU.
TEST(Selector, P2PSplitsOnGpus) {
  SelectorConfig c = cfg();
  EXPECT_EQ(Selector(2, presets::linkTraits("socket"), c).p2pSplit().maxChannels, 1);
  c.gpuLanes = true;
  EXPECT_EQ(Selector(2, presets::linkTraits("shm"), c).p2pSplit().maxChannels, kMaxP2PChannels);
  EXPECT_EQ(Selector(2, presets::linkTraits("shm"), c).p2pSplit().bytesPerChannel, 512u << 10);
  c.nChannels = 2;
  EXPECT_EQ(Selector(2, presets::linkTraits("shm"), c).p2pSplit().maxChannels, 2);
}

// The latency algorithm: recursive doubling where it saves messages (see
// Selector::latencyAlgo), direct elsewhere; the same threshold for both.
TEST(Selector, LatencyAlgorithmByTransportAndRanks) {
  Selector shm3(3, presets::linkTraits("shm"), cfg());
  EXPECT_EQ(shm3.select(Coll::kAllReduce, 8).algo, Algo::kDirect);
  EXPECT_EQ(shm3.select(Coll::kAllGather, 8).algo, Algo::kDirect);
  Selector shm8(8, presets::linkTraits("shm"), cfg());
  EXPECT_EQ(shm8.select(Coll::kAllReduce, 8).algo, Algo::kDoubling);
  EXPECT_EQ(shm8.select(Coll::kAllGather, 8).algo, Algo::kDirect);
  Selector sock3(3, presets::linkTraits("socket"), cfg());
  EXPECT_EQ(sock3.select(Coll::kAllReduce, 64 << 10).algo, Algo::kDoubling);
  EXPECT_EQ(sock3.select(Coll::kAllReduce, (64 << 10) + 1).algo, Algo::kRing);
  EXPECT_EQ(sock3.select(Coll::kAllGather, 8).algo, Algo::kDirect);
  Selector sock4(4, presets::linkTraits("socket"), cfg());
  EXPECT_EQ(sock4.select(Coll::kAllGather, 64 << 10).algo, Algo::kDoubling);
  EXPECT_EQ(sock4.select(Coll::kBroadcast, 8).algo, Algo::kRing) << "the chain pipelines";
  EXPECT_EQ(Selector(2, presets::linkTraits("socket"), cfg()).select(Coll::kBroadcast, 8).algo,
            Algo::kDirect);
  Selector sock8(8, presets::linkTraits("socket"), cfg());
  EXPECT_EQ(sock8.select(Coll::kBroadcast, 64 << 10).algo, Algo::kDoubling) << "the binomial tree";
  EXPECT_EQ(sock8.select(Coll::kBroadcast, (64 << 10) + 1).algo, Algo::kRing);
  EXPECT_EQ(Selector(4, presets::linkTraits("socket"), cfg("broadcast:^ring"))
                .select(Coll::kBroadcast, 8)
                .algo,
            Algo::kDoubling);
  EXPECT_EQ(shm8.select(Coll::kBroadcast, 8).algo, Algo::kDirect);
  EXPECT_EQ(Selector(4, presets::deviceRingTraits(), cfg()).select(Coll::kAllReduce, 8).algo,
            Algo::kDirect);
  // Excluding doubling leaves direct below the threshold; naming it alone keeps it at every size.
  EXPECT_EQ(Selector(4, presets::linkTraits("socket"), cfg("allreduce:^doubling"))
                .select(Coll::kAllReduce, 8)
                .algo,
            Algo::kDirect);
  EXPECT_EQ(Selector(4, presets::linkTraits("shm"), cfg("allgather:doubling"))
                .select(Coll::kAllGather, 1 << 30)
                .algo,
            Algo::kDoubling);
  // Halving-doubling over sockets: a power-of-two count of at least 4 ranks, 256 KiB..16 MiB.
  EXPECT_EQ(sock4.select(Coll::kAllReduce, 256 << 10).algo, Algo::kRing);
  EXPECT_EQ(sock4.select(Coll::kAllReduce, (256 << 10) + 1).algo, Algo::kHalving);
  EXPECT_EQ(sock4.select(Coll::kAllReduce, 16 << 20).algo, Algo::kHalving);
  EXPECT_EQ(sock4.select(Coll::kAllReduce, (16 << 20) + 1).algo, Algo::kRing);
  EXPECT_EQ(sock8.select(Coll::kAllReduce, 2 << 20).algo, Algo::kHalving);
  EXPECT_EQ(
      Selector(2, presets::linkTraits("socket"), cfg()).select(Coll::kAllReduce, 2 << 20).algo,
      Algo::kRing);
  EXPECT_EQ(
      Selector(6, presets::linkTraits("socket"), cfg()).select(Coll::kAllReduce, 2 << 20).algo,
      Algo::kRing);
  EXPECT_EQ(Selector(4, presets::linkTraits("shm"), cfg()).select(Coll::kAllReduce, 2 << 20).algo,
            Algo::kRing);
  EXPECT_EQ(Selector(4, presets::linkTraits("socket"), cfg("allreduce:ring,doubling"))
                .select(Coll::kAllReduce, 2 << 20)
                .algo,
            Algo::kRing);
  EXPECT_EQ(Selector(4, presets::linkTraits("shm"), cfg("allreduce:halving"))
                .select(Coll::kAllReduce, 8)
                .algo,
            Algo::kHalving);
  bool listed = false;
  for (const std::string& line : sock4.describeTable())
    listed |= line.find("allgather      doubling <= 65536 B < ring") != std::string::npos;
  EXPECT_TRUE(listed);
  bool band = false;
  for (const std::string& line : sock4.describeTable())
    band |= line.find(
                "allreduce      doubling <= 65536 B < ring <= 262144 B < halving <= "
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
  const Selector busy4(4, presets::linkTraits("socket"), crowded);
  EXPECT_EQ(busy4.select(Coll::kBroadcast, (256 << 10) - 1).algo, Algo::kRing);
  EXPECT_EQ(busy4.select(Coll::kBroadcast, 256 << 10).algo, Algo::kDoubling);
  EXPECT_EQ(busy4.select(Coll::kBroadcast, uint64_t{1} << 30).algo, Algo::kDoubling);
  EXPECT_EQ(busy4.select(Coll::kAllGather, 64 << 20).algo, Algo::kRing);
  EXPECT_EQ(
      Selector(8, presets::linkTraits("socket"), crowded).select(Coll::kBroadcast, 4 << 20).algo,
      Algo::kDoubling);
  // Not: hosts unknown or several, a CPU per rank, 3 ranks, shared memory,
  // doubling excluded, GPU buffers.
  EXPECT_EQ(
      Selector(4, presets::linkTraits("socket"), cfg()).select(Coll::kBroadcast, 4 << 20).algo,
      Algo::kRing);
  EXPECT_EQ(
      Selector(3, presets::linkTraits("socket"), crowded).select(Coll::kBroadcast, 4 << 20).algo,
      Algo::kRing);
  EXPECT_EQ(Selector(4, presets::linkTraits("shm"), crowded).select(Coll::kBroadcast, 4 << 20).algo,
            Algo::kRing);
  SelectorConfig ringOnly = cfg("broadcast:ring,direct");
  ringOnly.hostCpus = 2;
  EXPECT_EQ(
      Selector(4, presets::linkTraits("socket"), ringOnly).select(Coll::kBroadcast, 4 << 20).algo,
      Algo::kRing);
  crowded.gpuLanes = true;
  EXPECT_EQ(
      Selector(4, presets::linkTraits("socket"), crowded).select(Coll::kBroadcast, 4 << 20).algo,
      Algo::kRing);
  SelectorConfig roomy = cfg();
  roomy.hostCpus = 4;
  EXPECT_EQ(
      Selector(4, presets::linkTraits("socket"), roomy).select(Coll::kBroadcast, 4 << 20).algo,
      Algo::kRing);
  // Two ranks over sockets on one host: one channel (several hosts: two).
  SelectorConfig one = cfg();
  one.hostCpus = 2;
  const Selector pair(2, presets::linkTraits("socket"), one),
      apart(2, presets::linkTraits("socket"), cfg());
  EXPECT_EQ(pair.select(Coll::kAllGather, 8 << 20).params.nChannels, 1);
  EXPECT_EQ(apart.select(Coll::kAllGather, 8 << 20).params.nChannels, 2);
  EXPECT_EQ(busy4.select(Coll::kAllGather, 8 << 20).params.nChannels, 2);
  bool listed = false;
  for (const std::string& line : busy4.describeTable())
    listed |= line.find("broadcast      ring < 262144 B <= doubling") != std::string::npos;
  EXPECT_TRUE(listed);
}

TEST(Selector, Overrides) {
  Selector s(4, presets::linkTraits("shm"),
             cfg(" AllReduce : Ring ; broadcast:direct;reduce:^direct "));
  EXPECT_EQ(s.select(Coll::kAllReduce, 1).algo, Algo::kRing);
  EXPECT_EQ(s.select(Coll::kBroadcast, 1u << 30).algo, Algo::kDirect);
  EXPECT_EQ(s.select(Coll::kReduce, 1).algo, Algo::kRing);
  EXPECT_EQ(s.select(Coll::kAllGather, 1).algo, Algo::kDirect);  // untouched
  Selector all(4, presets::linkTraits("shm"), cfg("ring"));
  EXPECT_EQ(all.select(Coll::kAllGather, 1).algo, Algo::kRing);
  EXPECT_EQ(all.select(Coll::kGather, 1).algo, Algo::kDirect);  // falls back (WARN)
  Selector both(4, presets::linkTraits("shm"), cfg("all_reduce:ring,direct"));
  EXPECT_EQ(both.select(Coll::kAllReduce, 1).algo, Algo::kDirect);
  EXPECT_EQ(both.select(Coll::kAllReduce, 1 << 20).algo, Algo::kRing);
}

TEST(Selector, UnsupportedOverrideFallsBack) {
  Selector s(4, presets::linkTraits("shm"), cfg("reducescatter:doubling"));
  EXPECT_EQ(s.select(Coll::kReduceScatter, 1).algo, Algo::kRing);
  Selector d(4, presets::linkTraits("shm"), cfg("reducescatter:direct"));
  EXPECT_EQ(d.select(Coll::kReduceScatter, 1).algo, Algo::kDirect);
  Selector g(4, presets::linkTraits("shm"), cfg("gather:ring"));
  EXPECT_EQ(g.select(Coll::kGather, 1).algo, Algo::kDirect);
}

void expectBadOverride(const std::string& text, const std::string& fragment) {
  try {
    Selector s(4, presets::linkTraits("shm"), cfg(text));
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
  EXPECT_NO_THROW(Selector(4, presets::linkTraits("shm"), cfg(";;")));
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
  Selector s(4, presets::linkTraits("shm"), c);
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
  Selector s(8, presets::linkTraits("shm"), cfg("allreduce:ring"));
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
  Selector two(2, presets::linkTraits("shm"), cfg(""));
  EXPECT_EQ(two.eagerMaxBytes(), 8192u) << "min(8K, 16K / 1)";
  EXPECT_TRUE(two.eager(call(Coll::kAllReduce, 2048, 2)));
  EXPECT_FALSE(two.eager(call(Coll::kAllReduce, 2049, 2)));
  EXPECT_TRUE(two.eager(call(Coll::kAllGather, 1024, 2, groveFloat64)));
  EXPECT_FALSE(two.eager(call(Coll::kSendRecv, 1, 2)));
  EXPECT_FALSE(two.eager(call(Coll::kAllReduce, UINT64_MAX / 2, 2)))
      << "a huge count must not overflow into a small block";
  Selector four(4, presets::linkTraits("shm"), cfg(""));
  EXPECT_EQ(four.eagerMaxBytes(), 5440u) << "16K / 3, down to 64 B";
  EXPECT_EQ(Selector(64, presets::linkTraits("shm"), cfg("")).eagerMaxBytes(), 256u);
  EXPECT_EQ(Selector(1, presets::linkTraits("shm"), cfg("")).eagerMaxBytes(), 0u) << "no peers";
  EXPECT_EQ(Selector(2, presets::linkTraits("socket"), cfg("")).eagerMaxBytes(), 0u);
  EXPECT_EQ(Selector(2, presets::deviceRingTraits(), cfg("")).eagerMaxBytes(), 0u);
  SelectorConfig off = cfg("");
  off.eager = false;
  EXPECT_EQ(Selector(2, presets::linkTraits("shm"), off).eagerMaxBytes(), 0u);
  SelectorConfig big = cfg("");
  big.eagerMaxBytes = 1 << 20;
  EXPECT_TRUE(
      Selector(8, presets::linkTraits("shm"), big).eager(call(Coll::kBroadcast, 1 << 18, 8)));
  Selector ring(2, presets::linkTraits("shm"), cfg("allreduce:ring"));
  EXPECT_FALSE(ring.eager(call(Coll::kAllReduce, 2, 2))) << "an override names the algorithm";
  EXPECT_TRUE(ring.eager(call(Coll::kBroadcast, 2, 2)));
  std::vector<std::string> lines = ring.describeTable();
  EXPECT_EQ(lines[1].find("eager"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("eager <= 8192 B/block < direct"), std::string::npos) << lines[2];
}

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
      if (a.builders[c] != nullptr) {
        EXPECT_TRUE(runs) << a.name << " " << collName(static_cast<Coll>(c));
      }
      if (a.needsPlans) {
        EXPECT_EQ(a.builders[c], nullptr) << a.name;
      }
    }
  }
  // 17 pairs with rank-order builders (what the structural and end-to-end
  // tests run); tree and hier only through plans.
  EXPECT_EQ(builtCombos().size(), 17u);
  EXPECT_THROW(build(Algo::kTree, CollArgs{}, PlanParams{}), Error);
}

// ------------------------------------------------------------------ trees, hier, size table

TEST(TreeSelector, NamesSupportAndOverrides) {
  EXPECT_EQ(parseAlgo("tree"), Algo::kTree);
  EXPECT_EQ(parseAlgo("TREES"), Algo::kTree);
  EXPECT_EQ(parseAlgo("hier"), Algo::kHier);
  EXPECT_STREQ(algoName(Algo::kTree), "tree");
  EXPECT_STREQ(algoName(Algo::kHier), "hier");
  EXPECT_TRUE(algoSupports(Algo::kTree, Coll::kBroadcast));
  EXPECT_TRUE(algoSupports(Algo::kTree, Coll::kReduce));
  EXPECT_TRUE(algoSupports(Algo::kTree, Coll::kAllGather));  // over forests
  EXPECT_TRUE(algoSupports(Algo::kTree, Coll::kReduceScatter));
  EXPECT_FALSE(algoSupports(Algo::kTree, Coll::kGather));
  EXPECT_FALSE(algoSupports(Algo::kTree, Coll::kAlltoAll));
  EXPECT_TRUE(algoSupports(Algo::kHier, Coll::kAllReduce));
  EXPECT_FALSE(algoSupports(Algo::kHier, Coll::kBroadcast));

  SelectorConfig cfg;
  Selector def(4, presets::linkTraits("shm"), cfg);
  for (uint64_t bytes : {uint64_t{8}, uint64_t{1} << 30}) {
    const Algo a = def.select(Coll::kAllReduce, bytes).algo;
    EXPECT_TRUE(a == Algo::kRing || a == Algo::kDirect || a == Algo::kDoubling)
        << "trees are never picked by default";
  }
  cfg.algo = "tree";
  Selector trees(4, presets::linkTraits("shm"), cfg);
  EXPECT_EQ(trees.select(Coll::kAllReduce, 8).algo, Algo::kTree);
  EXPECT_EQ(trees.select(Coll::kBroadcast, 1 << 20).algo, Algo::kTree);
  EXPECT_EQ(trees.select(Coll::kAllGather, 1 << 20).algo, Algo::kTree);
  EXPECT_NE(trees.select(Coll::kGather, 1 << 20).algo, Algo::kTree);
  cfg.algo = "allreduce:hier";
  Selector hier(4, presets::linkTraits("shm"), cfg);
  EXPECT_EQ(hier.select(Coll::kAllReduce, 1 << 20).algo, Algo::kHier);

  CollArgs a{Coll::kAllReduce, 8, groveFloat32, groveSum, 0, 0, 4, false};
  EXPECT_THROW(build(Algo::kTree, a, PlanParams{}), Error);
  EXPECT_THROW(build(Algo::kHier, a, PlanParams{}), Error);
}

TEST(TreeSelector, SizeTableReplacesThresholdsWithinOverrides) {
  SelectorConfig cfg;
  Selector sel(4, presets::linkTraits("shm"), cfg);
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  sel.setSizeTable(Coll::kAllReduce,
                   {{4096, Algo::kDirect}, {1 << 20, Algo::kTree}, {kMax, Algo::kRing}});
  EXPECT_EQ(sel.select(Coll::kAllReduce, 4096).algo, Algo::kDirect);
  EXPECT_EQ(sel.select(Coll::kAllReduce, 4097).algo, Algo::kTree);
  EXPECT_EQ(sel.select(Coll::kAllReduce, 1 << 20).algo, Algo::kTree);
  EXPECT_EQ(sel.select(Coll::kAllReduce, (1 << 20) + 1).algo, Algo::kRing);
  EXPECT_EQ(sel.sizeTable(Coll::kAllReduce).size(), 3u);
  bool listed = false;
  for (const std::string& line : sel.describeTable())
    listed |= line.find("tree <= 1048576") != std::string::npos;
  EXPECT_TRUE(listed);
  EXPECT_THROW(sel.setSizeTable(Coll::kGather, {{kMax, Algo::kTree}}), Error);
  EXPECT_THROW(sel.setSizeTable(Coll::kAllGather, {{kMax, Algo::kHier}}), Error);
  EXPECT_THROW(sel.setSizeTable(Coll::kAllReduce, {{100, Algo::kRing}}), Error);
  EXPECT_THROW(sel.setSizeTable(Coll::kAllReduce,
                                {{100, Algo::kRing}, {50, Algo::kDirect}, {kMax, Algo::kRing}}),
               Error);
  sel.setSizeTable(Coll::kAllReduce, {});
  EXPECT_NE(sel.select(Coll::kAllReduce, 1 << 20).algo, Algo::kTree);

  // An override that excludes the table's choice falls back among the allowed.
  cfg.algo = "allreduce:ring,direct";
  Selector restricted(4, presets::linkTraits("shm"), cfg);
  restricted.setSizeTable(Coll::kAllReduce, {{kMax, Algo::kTree}});
  const Algo a = restricted.select(Coll::kAllReduce, 1 << 20).algo;
  EXPECT_TRUE(a == Algo::kRing || a == Algo::kDirect);
}

}  // namespace
}  // namespace grove::plan
