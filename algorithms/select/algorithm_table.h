// The algorithm table: one row per algorithm -- its id, name, one line of
// description, whether it builds only from the communicator's topology
// plans, which collectives it runs, and per collective the builder that
// lowers it to the schedule IR in rank order. The selector, GROVE_ALGO's
// parsing and error text, build(), grove-plan and the tests all read this
// table instead of switching on the algorithm.
//
// Adding an algorithm: an Algo value (selector.h), one row in
// algorithm_table.cc and its builder file (builders.h).
#pragma once

#include <array>
#include <vector>

#include "algorithms/select/selector.h"
#include "ir/schedule.h"

namespace grove::plan {

/// Lowers one collective to one rank's program, in rank order (no plans).
using BuildFn = Program (*)(const CollArgs& args, const PlanParams& params);

/// One row of the table.
struct AlgoInfo {
  Algo id;
  const char* name;                         ///< what GROVE_ALGO and logs call it
  const char* description;                  ///< one line (grove-plan, help texts)
  bool needsPlans;                          ///< builds only from topology plans (build(..., plans))
  unsigned colls;                           ///< bit c: runs Coll c
  std::array<BuildFn, kNumColls> builders;  ///< rank-order builder per Coll; null: none
};

/// Every algorithm, indexed by Algo.
const std::array<AlgoInfo, kNumAlgos>& algorithmTable();
/// The row of `a`.
const AlgoInfo& algoInfo(Algo a);

/// Every (collective, algorithm) pair with a rank-order builder, in table
/// order (the tests build and run each).
struct AlgoCombo {
  Coll coll;
  Algo algo;
};
std::vector<AlgoCombo> builtCombos();

}  // namespace grove::plan
