// Comm's tuning for a fabric: the cost model's per-size choice of
// algorithm for a communicator whose topology gives its links addresses,
// made on rank 0 and handed to the other ranks.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/cost/cost_model.h"
#include "algorithms/cost/tuning_share.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/selector.h"
#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/connections.h"

namespace grove::core {

namespace {

// The least the ranks wait for rank 0's tuning for a fabric (its planning and
// simulations take seconds, on large fabrics minutes); a dead rank 0 or an
// abort still ends the wait at once.
constexpr double kTuningWaitSec = 600;

}  // namespace

void Comm::tuneIfFabric(bool linkAddresses) {
  // Tuning is collective (rank 0 tunes for all), so every rank takes part
  // or none does: the agreed topology decides who asks (the same on every
  // rank; the caller checked it), and each says whether its own links are
  // addressed and carried by the network.
  const uint8_t network = linkAddresses && connections_->usesNetwork() ? 1 : 0;
  const std::vector<uint8_t> all = bootstrap_->allGather(&network, 1);
  const size_t over = static_cast<size_t>(std::count(all.begin(), all.end(), uint8_t{1}));
  if (over == all.size())
    tuneForFabric();
  else if (over > 0)
    GROVE_WARN(log::kPlan,
               "%zu of %d ranks reach their peers over the network: no cost-model tuning, "
               "the default algorithm thresholds stay",
               over, nranks_);
}

// A topology whose links carry addresses describes the network the bytes
// really cross (an emulated fabric, a multi-NIC cluster), so the cost model's
// per-size choice over it replaces the transport's default thresholds (the
// same tuning grove-plan reports as "selected").
//
// Rank 0 tunes for every rank: the plans and the per-size simulations take
// seconds of CPU on a large fabric, and ranks sharing a host would each pay
// them at once (8 ranks on 2 cores: 10 s each for the trees alone). The
// others wait in a bootstrap broadcast and take its plans and tables
// (algorithms/cost/tuning_share.h), checked as stored plans are, so every
// rank runs the same choice. A rank that cannot take them tunes by itself,
// which gives the same result (planning is deterministic), or fails; when
// rank 0's tuning fails (or cannot be sent), every rank keeps the default
// thresholds. The others wait for rank 0 at least kTuningWaitSec.
void Comm::tuneForFabric() {
  const plan::SimParams sim = plan::simParamsFor(connections_->traits());
  // Tunes a copy of the selector (all tables or none); nullopt and a
  // warning when it fails.
  auto tuneHere = [&]() -> std::optional<plan::Selector> {
    try {
      plans_->planAllReduce();  // what the model weighs for all-reduce, planned at once
      plan::Selector tuned = *selector_;
      plan::tuneSelector(tuned, *plans_, nranks_, sim);
      return tuned;
    } catch (const std::exception& e) {
      GROVE_WARN(log::kPlan, "cost-model tuning failed (%s): default algorithm thresholds stay",
                 e.what());
      return std::nullopt;
    }
  };
  std::vector<uint8_t> bundle;
  if (rank_ == 0) {
    // Rank 0 keeps its tables only when the others can have them too.
    if (std::optional<plan::Selector> tuned = tuneHere()) {
      try {
        const std::string text = plan::encodeTuning(*plans_, *tuned);
        bundle.assign(text.begin(), text.end());
        *selector_ = std::move(*tuned);
      } catch (const std::exception& e) {
        GROVE_WARN(log::kPlan,
                   "the tuning cannot go to the other ranks (%s): default "
                   "algorithm thresholds stay",
                   e.what());
      }
    }
  }
  // Rank 0 may plan for minutes on a large fabric: the others wait at least
  // kTuningWaitSec for it (its death or an abort still ends the wait).
  if (nranks_ > 1)
    bundle = bootstrap_->broadcast(0, bundle, std::max(options_.timeoutSec, kTuningWaitSec));
  if (rank_ != 0) {
    if (bundle.empty()) return;  // rank 0 said why; the defaults stay everywhere
    std::string why;
    if (plan::applyTuning(std::string(bundle.begin(), bundle.end()), *plans_, *selector_, &why)) {
      GROVE_INFO(log::kPlan, "took rank 0's tuning (%zu bytes)", bundle.size());
    } else {
      // Tuning here gives rank 0's result (planning is deterministic);
      // a rank that cannot must not run other tables than the rest.
      GROVE_WARN(log::kPlan, "rank 0's tuning does not fit this rank (%s): tuning here",
                 why.c_str());
      std::optional<plan::Selector> tuned = tuneHere();
      if (!tuned)
        throw Error(groveInternalError,
                    "rank " + std::to_string(rank_) +
                        " can neither take rank 0's cost-model tuning nor tune by itself");
      *selector_ = std::move(*tuned);
    }
  }
  for (const std::string& line : selector_->describeTable())
    GROVE_INFO(log::kPlan, "tuned for the topology: %s", line.c_str());
}

}  // namespace grove::core
