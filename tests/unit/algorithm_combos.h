// Every (collective, algorithm) pair the planners build, shared by the
// structural and the end-to-end algorithm tests.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "algorithms/select/algorithm_table.h"
#include "algorithms/select/selector.h"

namespace grove::plan::testing {

/// One collective built by one algorithm.
struct Combo {
  Coll coll;
  Algo algo;
};

/// Every pair with a rank-order builder, from the algorithm table
/// (send/recv is tested on its own; tree and hier need plans).
inline const std::vector<Combo> kCombos = [] {
  std::vector<Combo> out;
  for (const AlgoCombo& c : builtCombos()) out.push_back({c.coll, c.algo});
  return out;
}();

/// How gtest prints a pair in messages: "allreduce/ring".
inline void PrintTo(const Combo& c, std::ostream* os) {
  *os << collName(c.coll) << "/" << algoName(c.algo);
}

/// Test name of a pair: "allreduce_ring".
inline std::string comboName(const ::testing::TestParamInfo<Combo>& info) {
  return std::string(collName(info.param.coll)) + "_" + algoName(info.param.algo);
}

}  // namespace grove::plan::testing
