// Every (collective, algorithm) pair the planners build, shared by the
// structural and the end-to-end algorithm tests.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "algorithms/selector.h"

namespace grove::plan::testing {

/// One collective built by one algorithm.
struct Combo {
  Coll coll;
  Algo algo;
};

/// Every pair the builders support (send/recv is tested on its own).
inline constexpr Combo kCombos[] = {
    {Coll::kAllReduce, Algo::kRing},  {Coll::kAllReduce, Algo::kDirect},
    {Coll::kBroadcast, Algo::kRing},  {Coll::kBroadcast, Algo::kDirect},
    {Coll::kReduce, Algo::kRing},     {Coll::kReduce, Algo::kDirect},
    {Coll::kAllGather, Algo::kRing},  {Coll::kAllGather, Algo::kDirect},
    {Coll::kReduceScatter, Algo::kRing}, {Coll::kGather, Algo::kDirect},
    {Coll::kScatter, Algo::kDirect},  {Coll::kAlltoAll, Algo::kDirect},
    {Coll::kAllReduce, Algo::kDoubling}, {Coll::kAllGather, Algo::kDoubling},
    {Coll::kBroadcast, Algo::kDoubling}, {Coll::kAllReduce, Algo::kHalving},
};

/// How gtest prints a pair in messages: "allreduce/ring".
inline void PrintTo(const Combo& c, std::ostream* os) {
  *os << collName(c.coll) << "/" << algoName(c.algo);
}

/// Test name of a pair: "allreduce_ring".
inline std::string comboName(const ::testing::TestParamInfo<Combo>& info) {
  return std::string(collName(info.param.coll)) + "_" + algoName(info.param.algo);
}

}  // namespace grove::plan::testing
