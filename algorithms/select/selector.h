// The algorithm selection table (UCC-style): for each collective, which
// algorithm runs for which message size, with user overrides and fallback.
//
// Eager first: over shared memory, a call whose block (count x element size)
// is at most GROVE_EAGER_MAX_BYTES runs as an eager collective over slot
// links (exec/eager.h) instead of a program, unless an override names its
// collective. The automatic limit, min(8 KiB, 16 KiB / (nranks - 1)), keeps
// a rank's eager traffic per call (its block to each peer) near the size
// where the programs catch up (measured with 2 and 4 ranks). What an eager
// call sends is a program too -- the direct algorithm's (eagerProgram) --
// which the eager path carries out message for message over slots instead
// of interpreting it; the validator, the deadlock simulator and grove-plan
// read that program.
//
// Default choice: the rules of default_rules.h, as data keyed by the link
// traits (network, shared memory, device), the rank count and the message
// size: a latency algorithm up to GROVE_DIRECT_MAX_BYTES total message bytes
// (direct, or recursive doubling where the rules say), the ring (chain for
// broadcast/reduce) above, with the bands where halving-doubling or the
// binomial tree beat it. grove-info prints the rules and what they give.
// Reduce-scatter uses the ring by default (direct only through an override
// or the cost model's table); gather, scatter, all-to-all and send/recv
// have one (direct) algorithm. Trees and the hierarchical
// algorithm are never picked by default: only through an override
// (GROVE_ALGO=tree) or a per-size table (setSizeTable, which the cost model
// fills).
//
// Overrides (GROVE_ALGO, or the communicator config's `algo` string):
//   "allreduce:ring;broadcast:direct"   per collective, ';'-separated
//   "allreduce:ring,direct"             a set: the table picks within it
//   "allreduce:^direct"                 everything but direct
//   "ring"                              (no collective) applies to all
// Unknown collective or algorithm names throw Error(groveInvalidArgument)
// listing the valid names; an override that leaves a collective no
// algorithm that supports it is ignored for that collective with a WARN log.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/link_traits.h"
#include "ir/schedule.h"

namespace grove::plan {

/// Algorithm families: rings (chains for broadcast/reduce), direct
/// (latency), trees packed from the topology, hierarchical (machines),
/// recursive doubling and halving, all-reduce over the packed forests.
enum class Algo : uint8_t {
  kRing = 0,
  kDirect = 1,
  kTree = 2,
  kHier = 3,
  kDoubling = 4,
  kHalving = 5,
  kForest = 6
};
/// Number of Algo values.
constexpr int kNumAlgos = 7;
/// Number of Coll values.
constexpr int kNumColls = 9;

/// Name of an algorithm: "ring", "direct", "tree", "hier", "doubling", "halving", "forest".
const char* algoName(Algo a);
/// Parses an algorithm name (case-insensitive; "trees" is "tree"); nullopt if unknown.
std::optional<Algo> parseAlgo(const std::string& name);
/// Parses a collective name as collName() prints it (case-insensitive,
/// '_' ignored: "all_reduce" works too); nullopt if unknown.
std::optional<Coll> parseColl(const std::string& name);
/// True if `algo` can run `coll` (kDirect runs sendrecv via buildP2P; kTree
/// runs allreduce, broadcast, reduce, and over forests allgather and
/// reducescatter; kHier runs allreduce; kDoubling
/// runs allreduce, allgather and broadcast; kHalving and kForest run allreduce).
bool algoSupports(Algo algo, Coll coll);

class TopoPlans;
struct RuleContext;

/// Builds one rank's program for a collective with the given algorithm, in
/// rank order (no topology plans). Throws Error(groveInvalidArgument) if the
/// algorithm does not support the collective (and for kSendRecv, which needs
/// buildP2P) or needs plans (kTree, kHier).
Program build(Algo algo, const CollArgs& args, const PlanParams& params);

/// Builds one rank's program using the communicator's topology plans: kTree
/// lowers plans->allReduceTrees(), plans->rootedTrees(root),
/// plans->allGatherTrees() or plans->reduceScatterTrees(), kHier
/// plans->hierarchical(), and kRing the planned ring orders for all-reduce,
/// all-gather and reduce-scatter when they differ from the one rank-order
/// ring. `plans` may be null (then as build() above). Every rank must pass
/// plans built from the same graph.
Program build(Algo algo, const CollArgs& args, const PlanParams& params, TopoPlans* plans);

/// The program an eager call follows: the direct algorithm's on one channel
/// (one message per pair of ranks that exchange data, each the call's
/// block; reductions in rank order). exec/eager.h sends exactly these
/// messages, one slot each, and computes what the program's local phase
/// computes, without interpreting it: a slot carries a small message and
/// its ready flag in one cache line, where a program over byte rings pays
/// a second line for the ring's counter and the interpreter's steps (8 B
/// all-reduce, 2 ranks: 0.17 us eager, docs/benchmarks.md). Throws
/// Error(groveInvalidArgument) for send/recv (never eager).
Program eagerProgram(const CollArgs& args);

/// On a GPU each channel is one thread block, and one block moves about 9 GB/s
/// (a copy keeps 32 KiB per block in flight): automatic channels grow by one
/// per kGpuBytesPerChannel of message, up to kGpuMaxChannels, and the CUDA
/// engine widens long local steps the same way. Measured on an H100, 2 ranks
/// as threads sharing it, ring all-reduce of 256 MiB: 1, 2, 8, 32 channels
/// gave 9, 19, 70, 204 GB/s bus bandwidth; at 1 MiB 32 channels were slower
/// than 2.
inline constexpr uint64_t kGpuBytesPerChannel = 512u << 10;
inline constexpr int kGpuMaxChannels = 32;

/// The selector's inputs, normally read from the config registry.
struct SelectorConfig {
  std::string algo;  ///< override text ("" = none), see the file comment
  uint64_t directMaxBytes =
      0;              ///< direct algorithms up to this many message bytes; 0 = per transport
  bool eager = true;  ///< eager collectives over shared memory
  uint64_t eagerMaxBytes = 0;      ///< eager collectives up to this block size; 0 = by rank count
  uint64_t chunkBytes = 0;         ///< pipelined step size; 0 = bufferBytes / 2
  uint64_t bufferBytes = 1 << 20;  ///< each connection's buffer per direction
  int nChannels = 0;               ///< channels per collective; 0 = automatic
  bool gpuLanes = false;           ///< lanes run as GPU thread blocks (CUDA communicators)
  /// CPUs of the one host every rank runs on; 0 when the ranks span hosts
  /// (or it is not known). More ranks than CPUs changes the broadcast.
  int hostCpus = 0;

  /// Reads GROVE_ALGO, GROVE_DIRECT_MAX_BYTES, GROVE_EAGER, GROVE_EAGER_MAX_BYTES,
  /// GROVE_CHUNKSIZE, GROVE_BUFFSIZE and GROVE_NCHANNELS; a non-empty `algoOverride` (the comm config's
  /// `algo`) replaces GROVE_ALGO, and `nChannels` > 0 replaces GROVE_NCHANNELS.
  static SelectorConfig fromRegistry(const char* algoOverride = nullptr, int nChannels = 0);
};

/// One row of a per-size table: `algo` runs messages of at most maxBytes
/// (and more than the previous row's maxBytes); the last row has UINT64_MAX.
struct SizeRule {
  uint64_t maxBytes = 0;
  Algo algo = Algo::kRing;
};

/// The choice for one call.
struct Selection {
  Algo algo = Algo::kRing;
  PlanParams params;
};

/// Maps (collective, message bytes) to an algorithm and its parameters.
class Selector {
 public:
  /// Parses cfg.algo (throws Error(groveInvalidArgument) on unknown names)
  /// and fixes the channel count and chunk size for this communicator.
  /// `links`: the traits of the slowest transport in use (the transport
  /// registry's rows state them; the selector never asks which it is).
  Selector(int nranks, const LinkTraits& links, const SelectorConfig& cfg);

  /// The algorithm for a collective of `bytes` total message bytes
  /// (as messageBytes() counts them).
  Selection select(Coll coll, uint64_t bytes) const;
  /// The algorithm for a call.
  Selection select(const CollArgs& args) const;
  /// How send/recv groups spread long ops over channels: on a GPU a channel
  /// per 512 KiB, up to 16 (or GROVE_NCHANNELS, at most 16); on the host
  /// every op keeps one channel.
  P2PSplit p2pSplit() const;
  /// True if a call runs as an eager collective over slot links instead of
  /// a program (see exec/eager.h): only over shared memory, with two or more
  /// ranks, for any collective but send/recv whose block (count x element
  /// size) is at most eagerMaxBytes(), unless an override names the
  /// collective's algorithms.
  bool eager(const CollArgs& args) const {
    return eagerMaxBytes_ != 0 && !overridden_[static_cast<int>(args.coll)] &&
           args.coll != Coll::kSendRecv && args.count <= eagerMaxBytes_ &&
           args.count * dtypeSize(args.dtype) <= eagerMaxBytes_;
  }
  /// The eager limit on a block, 0 when calls never run eagerly here.
  uint64_t eagerMaxBytes() const { return eagerMaxBytes_; }

  /// Replaces the default thresholds of `coll` with a size table (rows in
  /// ascending maxBytes, the last one UINT64_MAX; an empty table restores the
  /// defaults). Overrides still apply: a row whose algorithm they exclude
  /// falls back to the default choice among the allowed ones. Throws
  /// Error(groveInvalidArgument) on unsorted rows, a missing UINT64_MAX row or
  /// an algorithm that cannot run `coll`.
  void setSizeTable(Coll coll, std::vector<SizeRule> rules);
  /// The size table of `coll` (empty = default thresholds).
  const std::vector<SizeRule>& sizeTable(Coll coll) const {
    return tables_[static_cast<int>(coll)];
  }

  /// The planner knobs every selection carries.
  const PlanParams& params() const { return params_; }
  /// Algorithms allowed for `coll` after the overrides (bit i = Algo i).
  unsigned allowedMask(Coll coll) const { return allowed_[static_cast<int>(coll)]; }

  /// One human-readable line per collective, e.g.
  /// "allreduce      direct <= 16384 B < ring", for grove-info.
  std::vector<std::string> describeTable() const;

 private:
  void parseOverrides(const std::string& text);
  RuleContext ruleContext() const;
  Algo defaultAlgo(Coll coll, unsigned mask, uint64_t bytes) const;
  std::string describeDefault(Coll coll, unsigned mask) const;

  int nranks_;
  LinkTraits links_;
  uint64_t directMaxBytes_;
  uint64_t eagerMaxBytes_;
  bool autoChannels_;  // channel count chosen here (not by the user): fewer for small messages
  bool gpuLanes_;      // automatic channels grow with the message (one thread block each)
  int hostCpus_;       // CPUs of the one host of all ranks (0: several hosts, unknown)
  PlanParams params_;
  std::array<unsigned, kNumColls> allowed_{};
  std::array<bool, kNumColls> overridden_{};
  std::array<std::vector<SizeRule>, kNumColls> tables_;
};

}  // namespace grove::plan
