// A lowered device program's arrays kept in host memory, laid out for its
// DevProgramView: what the engines that interpret programs on the host
// (the emulation) or turn them into stream tapes there (device_engine_stream.cc)
// install.
#pragma once

#include <memory>
#include <vector>

#include "core/device_connections.h"
#include "exec/device/dev_program.h"

namespace grove::core {

struct HostProgram {
  std::vector<exec::dev::DevPhase> phases;
  std::vector<exec::dev::DevLane> lanes;
  std::vector<exec::dev::DevStep> steps;
  std::vector<transport::DevRing> sends, recvs;
  exec::dev::DevProgramView view;
};

/// Copies `program` and its ring tables; the view points into the copy.
inline std::unique_ptr<HostProgram> hostProgram(const exec::dev::DevProgram& program,
                                                const DeviceRingTables& rings) {
  auto p = std::make_unique<HostProgram>();
  p->phases = program.phases;
  p->lanes = program.lanes;
  p->steps = program.steps;
  p->sends = rings.sends;
  p->recvs = rings.recvs;
  p->view.phases = p->phases.data();
  p->view.lanes = p->lanes.data();
  p->view.steps = p->steps.data();
  p->view.sends = p->sends.data();
  p->view.recvs = p->recvs.data();
  p->view.nPhases = static_cast<uint32_t>(p->phases.size());
  p->view.maxLanes = program.maxLanes;
  return p;
}

}  // namespace grove::core
