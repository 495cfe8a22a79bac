// The host side of NCCL's device API (nccl_device.h: device communicators,
// teams, barrier and LL all-to-all requirements). grove has no device-side
// API, but clients link these names whether or not they use them (PyTorch's
// libtorch_cuda does, for its symmetric memory), so the library must have
// them to load at all. What they answer:
// - the calls that would hand out device-side resources (ncclDevCommCreate
//   and the *CreateRequirement calls) refuse with ncclInvalidUsage, naming
//   why, so a client that tries the device API learns it at once;
// - the team queries describe a communicator without load/store peers: the
//   world team is every rank, the LSA ("load/store accessible") team is this
//   rank alone, the rail team (one rank of each LSA team) is therefore every
//   rank again; rank conversions follow NCCL's team arithmetic.
#include "shim.h"

using namespace grove::nccl;

namespace {

const char kNoDeviceApi[] =
    "grove's libnccl.so.2 has no NCCL device API (nccl_device.h); use the host collectives";

// This rank and the communicator's size, or {0, 0} for a handle grove refuses.
ncclTeam_t worldOf(ncclComm_t comm) {
  ncclTeam_t team{0, 0, 1};
  int n = 0, r = 0;
  if (groveCommCount(toGrove(comm), &n) != groveSuccess ||
      groveCommUserRank(toGrove(comm), &r) != groveSuccess)
    return team;
  team.nRanks = n;
  team.rank = r;
  return team;
}

}  // namespace

extern "C" {

ncclResult_t ncclDevCommCreate(ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  return refuse(ncclInvalidUsage, "ncclDevCommCreate", kNoDeviceApi);
}

ncclResult_t ncclDevCommDestroy(ncclComm_t, ncclDevComm_t const*) {
  return refuse(ncclInvalidUsage, "ncclDevCommDestroy", kNoDeviceApi);
}

ncclTeam_t ncclTeamWorld(ncclComm_t comm) { return worldOf(comm); }

ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  ncclTeam_t world = worldOf(comm);
  return ncclTeam_t{world.nRanks > 0 ? 1 : 0, 0, 1};
}

ncclTeam_t ncclTeamRail(ncclComm_t comm) { return worldOf(comm); }

// NCCL's arithmetic: member `rank` of `team` is world rank
// me + (rank - team.rank) * team.stride.
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  return worldOf(comm).rank + (rank - team.rank) * team.stride;
}

// Its index in this rank's LSA team (this rank alone): 0 for this rank, -1
// for any other.
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  return ncclTeamRankToWorld(comm, team, rank) == worldOf(comm).rank ? 0 : -1;
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*,
                                             ncclDevResourceRequirements_t*) {
  return refuse(ncclInvalidUsage, "ncclGinBarrierCreateRequirement", kNoDeviceApi);
}

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                             ncclDevResourceRequirements_t*) {
  return refuse(ncclInvalidUsage, "ncclLsaBarrierCreateRequirement", kNoDeviceApi);
}

// No LL all-to-all buffers exist here: no slots.
int ncclLLA2ACalcSlots(int, int) { return 0; }

ncclResult_t ncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*,
                                        ncclDevResourceRequirements_t*) {
  return refuse(ncclInvalidUsage, "ncclLLA2ACreateRequirement", kNoDeviceApi);
}

// NCCL's internal twin of ncclResetDebugInit.
void ncclResetDebugInitInternal(void) { mapNcclEnvironment(); }

}  // extern "C"

GROVE_NCCL_PNAME(DevCommCreate);
GROVE_NCCL_PNAME(DevCommDestroy);
GROVE_NCCL_PNAME(TeamWorld);
GROVE_NCCL_PNAME(TeamLsa);
GROVE_NCCL_PNAME(TeamRail);
GROVE_NCCL_PNAME(TeamRankToWorld);
GROVE_NCCL_PNAME(TeamRankToLsa);
GROVE_NCCL_PNAME(GinBarrierCreateRequirement);
GROVE_NCCL_PNAME(LsaBarrierCreateRequirement);
GROVE_NCCL_PNAME(LLA2ACalcSlots);
GROVE_NCCL_PNAME(LLA2ACreateRequirement);
