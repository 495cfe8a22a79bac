// What one rank's tuning found, for the ranks that did not tune: the plans
// it made and the selector's per-size tables (core/comm.cc: the ranks of a
// communicator over a fabric tune once, on rank 0, and take the result).
//
// How it works. The bundle is text: "grove-tuning 1", the plans'
// fingerprint (TopoPlans::sharingKey, "-" when none), the number of plans,
// then each plan as its item name, its length in bytes and plan_codec's
// text; then the number of size tables and each as its collective, its row
// count and each row's largest size ("max" for the last) and algorithm.
// Nothing read is trusted: every plan is checked against the graph as a
// stored plan is (TopoPlans::importPlans), every table as
// Selector::setSizeTable checks one, and the tables are applied only when
// all of them parse and pass.
#pragma once

#include <string>

#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/selector.h"

namespace grove::plan {

/// The plans `plans` holds and the size tables `sel` holds, as a bundle.
/// Throws Error(groveInvalidArgument) when applyTuning would refuse it for
/// its size (a plan over PlanStore::kMaxFileBytes, more than 4096 plans,
/// more than 256 MiB in all).
std::string encodeTuning(TopoPlans& plans, const Selector& sel);

/// Takes a bundle's plans into `plans` and its tables into `sel`. False,
/// and why, when it is not a well-formed bundle of plans of this graph;
/// `sel` is then unchanged (plans that passed their checks may stay: they
/// are this graph's).
bool applyTuning(const std::string& bundle, TopoPlans& plans, Selector& sel, std::string* why);

}  // namespace grove::plan
