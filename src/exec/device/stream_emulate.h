// Runs a stream tape (stream_tape.h) on host threads over host memory: the
// emulation of exec/cuda/stream_exec.h, so the tape path -- piece sizes,
// counters shared with the interpreter's rings, the wire rule, waits, abort,
// timeout and closed rings -- is tested without a GPU.
//
// How it works: the phases run one after another, the lanes of a phase at
// once, one std::thread each (the caller's thread runs lane 0), joined
// before the next phase, as events join a GPU's lane streams. Each lane
// runs its operations in order: a wait polls its counter (HostCtx's back-off)
// and on every empty poll checks the abort flag, another lane's failure,
// the ring's closed word (failing once the ring still blocks on a poll after
// the word was seen set) and the deadline; a post is a release store; copy,
// zero and reduce are the CPU kernels. The first failure is claimed in
// DevControl with its call, phase, lane and step.
#pragma once

#include "exec/device/dev_program.h"
#include "exec/device/stream_tape.h"

namespace grove::exec::dev {

/// Runs `tape` before returning; the outcome lands in ctl (kDevOk or the
/// first failure and where). ctl.timeoutNs == 0 means GROVE_TIMEOUT.
void runTapeEmulated(const LaunchTape& tape, DevControl& ctl);

}  // namespace grove::exec::dev
