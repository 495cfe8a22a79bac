// Shared by the tree / ordered-ring / hierarchical builder tests: hand-made
// trees and rings, and the structural check of one call (validator,
// deadlock simulation with barely more than one chunk per link, and the
// reference interpreter on real bytes with op avg).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms_interp.h"
#include "base/dtype.h"
#include "base/error.h"
#include "ir/validate.h"

namespace grove::plan::testing {

/// Builds rank `args.rank`'s program of a call.
using BuildFn = std::function<Program(const CollArgs&)>;

/// A tree from a parent vector.
/// Expects validatePrograms to reject `progs` with a message containing `what`.
inline void expectRejected(const std::vector<Program>& progs, const ValidateOptions& vo,
                           const std::string& what) {
  try {
    validatePrograms(progs, vo);
    ADD_FAILURE() << "accepted: " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

inline Tree treeOf(int root, std::vector<int> parent, double rate = 1) {
  Tree t;
  t.root = root;
  t.parent = std::move(parent);
  t.rate = rate;
  return t;
}

/// A tree pair (all-reduce): broadcast down `down`, reduce up `up` (same root).
inline Tree pairOf(Tree down, const Tree& up) {
  down.upParent = up.parent;
  return down;
}

/// Chain root -> root+1 -> ... -> root-1 (mod n).
inline Tree chainTree(int n, int root, double rate = 1) {
  std::vector<int> parent(n, -1);
  int prev = root;
  for (int k = 1; k < n; ++k) {
    const int v = (root + k) % n;
    parent[v] = prev;
    prev = v;
  }
  return treeOf(root, parent, rate);
}

/// Every rank a child of the root.
inline Tree starTree(int n, int root, double rate = 1) {
  std::vector<int> parent(n, root);
  parent[root] = -1;
  return treeOf(root, parent, rate);
}

/// Binary heap over positions (root at position 0, rank = (root + pos) % n).
inline Tree binaryTree(int n, int root, double rate = 1) {
  std::vector<int> parent(n, -1);
  for (int pos = 1; pos < n; ++pos) parent[(root + pos) % n] = (root + (pos - 1) / 2) % n;
  return treeOf(root, parent, rate);
}

/// A random spanning tree: each rank in a random order attaches to a random earlier one.
inline Tree randomTree(int n, int root, unsigned seed, double rate = 1) {
  std::mt19937 rng(seed);
  std::vector<int> order;
  for (int v = 0; v < n; ++v)
    if (v != root) order.push_back(v);
  std::shuffle(order.begin(), order.end(), rng);
  order.insert(order.begin(), root);
  std::vector<int> parent(n, -1);
  for (int i = 1; i < n; ++i)
    parent[order[i]] = order[std::uniform_int_distribution<int>(0, i - 1)(rng)];
  return treeOf(root, parent, rate);
}

/// A random ring order.
inline Ring randomRing(int n, unsigned seed, double rate = 1) {
  Ring ring;
  ring.order.resize(n);
  std::iota(ring.order.begin(), ring.order.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(ring.order.begin(), ring.order.end(), rng);
  ring.rate = rate;
  return ring;
}

/// One call to check.
struct TreeCase {
  Coll coll = Coll::kAllReduce;
  int nranks = 1;
  uint64_t count = 0;
  groveDataType_t dtype = groveFloat32;
  bool inPlace = false;
  int root = 0;
  PlanParams params;
};

inline std::string caseText(const TreeCase& c) {
  return std::string(collName(c.coll)) + " n=" + std::to_string(c.nranks) +
         " count=" + std::to_string(c.count) + " " + dtypeName(c.dtype) +
         (c.inPlace ? " inplace" : " outofplace") + " root=" + std::to_string(c.root) +
         " ch=" + std::to_string(c.params.nChannels) +
         " chunk=" + std::to_string(c.params.chunkBytes);
}

inline CollArgs argsOf(const TreeCase& c, int rank) {
  return CollArgs{c.coll, c.count, c.dtype, groveAvg, c.root, rank, c.nranks, c.inPlace};
}

/// Input value of element i on rank r: the values of one index over all
/// ranks sum to a multiple of nranks, so avg is exact.
inline uint64_t treeInput(int r, uint64_t i, int n) {
  if (r < n - 1) return (static_cast<uint64_t>(r) * 7 + i * 3) % 5;
  uint64_t others = 0;
  for (int q = 0; q < n - 1; ++q) others += (static_cast<uint64_t>(q) * 7 + i * 3) % 5;
  return static_cast<uint64_t>(n) + (n - others % n) % n;
}

/// Runs the interpreter and compares every output element (and, out of
/// place, that the inputs are untouched).
inline void interpretTreeCase(const TreeCase& c, const std::vector<Program>& progs) {
  const uint64_t es = dtypeSize(c.dtype);
  std::vector<RankMemory> mem(c.nranks);
  for (int r = 0; r < c.nranks; ++r) {
    const BufferSizes sz = bufferSizesFor(argsOf(c, r));
    RankMemory& m = mem[r];
    if (c.inPlace) {
      // As the C API defines in place: all-gather's input is the rank's
      // block of the output, reduce-scatter's output that of the input.
      m.arenaOut.assign(std::max(sz.input, sz.output) + 1, 0xCD);
      m.in = m.out = m.arenaOut.data();
      const uint64_t block = static_cast<uint64_t>(r) * c.count * es;
      if (c.coll == Coll::kAllGather) m.in += block;
      if (c.coll == Coll::kReduceScatter) m.out += block;
    } else {
      m.arenaIn.assign(sz.input + 1, 0xCD);
      m.arenaOut.assign(sz.output + 1, 0xCD);
      m.in = m.arenaIn.data();
      m.out = m.arenaOut.data();
    }
    for (uint64_t i = 0; i < sz.input / es; ++i) {
      const uint64_t v = treeInput(r, i, c.nranks);
      std::memcpy(m.in + i * es, &v, es);
    }
  }
  const std::vector<uint8_t> in0(mem[c.root].in,
                                 mem[c.root].in + bufferSizesFor(argsOf(c, c.root)).input);
  Interpreter(progs, mem, es, /*avg=*/true).run();
  const uint64_t mask = es == 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * es)) - 1);
  for (int r = 0; r < c.nranks; ++r) {
    const uint64_t outElems = bufferSizesFor(argsOf(c, r)).output / es;
    for (uint64_t i = 0; i < outElems; ++i) {
      uint64_t want = 0;
      if (c.coll == Coll::kBroadcast) {
        want = treeInput(c.root, i, c.nranks);
      } else if (c.coll == Coll::kAllGather) {
        want = treeInput(static_cast<int>(i / c.count), i % c.count, c.nranks);
      } else {
        // Reduce-scatter: rank r's block of every input.
        const uint64_t at = c.coll == Coll::kReduceScatter ? r * c.count + i : i;
        for (int q = 0; q < c.nranks; ++q) want += treeInput(q, at, c.nranks);
        want = (want / c.nranks) & mask;
      }
      uint64_t got = 0;
      std::memcpy(&got, mem[r].out + i * es, es);
      ASSERT_EQ(got, want) << "rank " << r << " element " << i;
    }
  }
  if (!c.inPlace && c.coll == Coll::kBroadcast) {
    ASSERT_TRUE(std::equal(in0.begin(), in0.end(), mem[c.root].in)) << "root input modified";
  }
}

/// Builds every rank's program and checks structure, deadlock freedom and
/// (for messages up to 64 KiB, or always with `interpret`) the bytes.
inline void checkTreeCase(const TreeCase& c, const BuildFn& build, bool interpret = false) {
  SCOPED_TRACE(caseText(c));
  const uint64_t es = dtypeSize(c.dtype);
  std::vector<Program> progs;
  for (int r = 0; r < c.nranks; ++r) progs.push_back(build(argsOf(c, r)));
  ValidateOptions vo;
  vo.elemSize = es;
  for (int r = 0; r < c.nranks; ++r) vo.sizes.push_back(bufferSizesFor(argsOf(c, r)));
  ASSERT_NO_THROW(validatePrograms(progs, vo)) << describe(progs[0]);
  for (const Program& p : progs)
    for (const Phase& ph : p.phases)
      for (const Lane& l : ph.lanes)
        for (const Step& s : l.steps) ASSERT_LT(s.channel, kP2PChannel) << describe(s);
  SimOptions so;
  so.elemSize = es;
  so.linkCapacity = (c.params.chunkBytes + 15) / 16 * 16 + 16;
  const SimResult res = simulatePrograms(progs, so);
  ASSERT_TRUE(res.completed) << res.problem;
  if (interpret || c.count * es * c.nranks <= (64u << 10)) interpretTreeCase(c, progs);
}

}  // namespace grove::plan::testing
