// Structural checks of a collective's programs, without moving real bytes:
// the "in-process loopback" check of every schedule in the unit tests (the
// executor harness then checks the real bytes).
//
// validatePrograms: given one Program per rank, checks that
//   - every step names valid peers (in range, never itself) and a channel >= 0;
//   - fan-out destinations (Step::moreSendPeers) only on kinds that send,
//     used entries first, no rank twice; each destination counts as a send
//     on its own link in everything below;
//   - fan-in sources (Step::moreRecvPeers) only on the reducing receives,
//     used entries first, no rank twice; each source counts as a receive on
//     its own link in everything below;
//   - within a phase, each directed link (src, dst, channel) is touched by at
//     most one lane on each end, so its order is well defined;
//   - for every link, the sequence of step byte counts the sender sends
//     equals, in order, the sequence the receiver receives;
//   - byte counts and buffer offsets are multiples of the element size;
//   - buffer references stay within the given buffer sizes, and nothing
//     writes the input buffer.
//
// simulatePrograms: runs all ranks' programs symbolically (byte counts only)
// the way the host executor does -- phases in order, the lanes of a phase
// progressing round-robin, each step streaming piecewise, limited by the
// bytes its incoming links hold (a fan-in step moves what all of them have
// ready), the free space of its outgoing links (capacity C each; a fan-out
// step moves what all of them have room for), element boundaries, and the
// 16-byte wire alignment at the
// start of every step -- and reports a deadlock if no lane of any rank can
// move while some are unfinished.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/schedule.h"

namespace grove::plan {

/// Sizes of one rank's bound buffers (scratch comes from Program::scratchBytes).
struct BufferSizes {
  uint64_t input = 0;
  uint64_t output = 0;
  std::vector<uint64_t> extra;  ///< Buf::kExtra buffers by index
};

/// The buffer sizes a call implies on args.rank (e.g. the output of a
/// non-root reduce is 0 bytes; an in-place input lies inside the output).
BufferSizes bufferSizesFor(const CollArgs& args);

/// Options of validatePrograms.
struct ValidateOptions {
  std::vector<BufferSizes> sizes;  ///< per rank; empty = skip the bounds checks
  uint64_t elemSize = 1;           ///< bytes and offsets must be multiples of it
};

/// Checks the programs of all ranks (index = rank) for structural
/// consistency; throws Error(groveInternalError) naming the first problem.
void validatePrograms(const std::vector<Program>& perRank, const ValidateOptions& options = {});

/// Options of simulatePrograms.
struct SimOptions {
  uint64_t linkCapacity = 1 << 20;  ///< bytes each directed link buffers (multiple of 16)
  uint64_t elemSize = 1;            ///< steps move whole elements (except a step's odd tail)
  uint64_t maxPasses = 0;           ///< give up after this many passes (0 = no limit)
};

/// Outcome of a simulation.
struct SimResult {
  bool completed = false;  ///< every rank finished and every link drained
  uint64_t passes = 0;     ///< round-robin passes over all ranks
  std::string problem;     ///< why not completed: the blocked lanes, or leftover bytes
};

/// Runs the programs symbolically (see the file comment). Programs are
/// assumed to pass validatePrograms.
SimResult simulatePrograms(const std::vector<Program>& perRank, const SimOptions& options);

/// simulatePrograms, throwing Error(groveInternalError) with the problem
/// text when the programs do not complete.
void checkDeadlockFree(const std::vector<Program>& perRank, const SimOptions& options);

}  // namespace grove::plan
