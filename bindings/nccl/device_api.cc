// The host side of NCCL's device API (nccl_device.h: device communicators,
// teams, barrier and LL all-to-all requirements). grove has no device-side
// API, but clients link these names whether or not they use them (PyTorch's
// libtorch_cuda does, for its symmetric memory), so the library must have
// them to load at all. What they answer:
// - the calls that would hand out device-side resources (ncclDevCommCreate
//   and the *CreateRequirement calls) refuse with ncclInvalidUsage, naming
//   why, so a client that tries the device API learns it at once;
// - the team queries: the world team is every rank; the LSA ("load/store
//   accessible") team is every rank of an ncclCommInitAll communicator on
//   host memory (all live in this process: a peer's buffer is an address here),
//   else this rank alone (grove maps no other process's memory); the rail
//   team is one rank of each LSA team; rank conversions follow NCCL's team
//   arithmetic. The CFT teams (2.32) are this rank alone, as no fabric tree
//   exists;
// - ncclCommQueryProperties says so: no device API, no multimem, no GIN,
//   no CFT, nRanks / lsaSize LSA teams; host RMA (put/signal) where buffers
//   are host memory (windows.cc).
// The window pointer queries live with the windows (windows.cc).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "comm_state.h"

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

namespace grove::nccl {

ncclTeam_t lsaTeamOf(groveComm_t comm) {
  const ncclTeam_t world = worldOf(toNccl(comm));
  if (world.nRanks <= 0) return ncclTeam_t{0, 0, 1};
  // Made by ncclCommInitAll (its hash names that one call): every rank is
  // in this process, one team of all. (A hash alone could be shared by
  // communicators of one NCCL_COMM_ID in other processes.)
  const bool initAll = withState(comm, [](CommState& s) { return s.initAll; });
  if (world.nRanks > 1 && initAll && hostMemory(comm)) return world;
  return ncclTeam_t{1, 0, 1};
}

}  // namespace grove::nccl

extern "C" {

ncclResult_t ncclDevCommCreate(ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  return refuse(ncclInvalidUsage, "ncclDevCommCreate", kNoDeviceApi);
}

ncclResult_t ncclDevCommDestroy(ncclComm_t, ncclDevComm_t const*) {
  return refuse(ncclInvalidUsage, "ncclDevCommDestroy", kNoDeviceApi);
}

ncclTeam_t ncclTeamWorld(ncclComm_t comm) { return worldOf(comm); }

ncclTeam_t ncclTeamLsa(ncclComm_t comm) { return lsaTeamOf(toGrove(comm)); }

// One rank of each LSA team, NCCL's: stride lsaSize from this rank.
ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  const ncclTeam_t world = worldOf(comm), lsa = lsaTeamOf(toGrove(comm));
  if (lsa.nRanks <= 0) return ncclTeam_t{0, 0, 1};
  return ncclTeam_t{world.nRanks / lsa.nRanks, world.rank / lsa.nRanks, lsa.nRanks};
}

// NCCL's arithmetic: member `rank` of `team` is world rank
// me + (rank - team.rank) * team.stride.
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  return worldOf(comm).rank + (rank - team.rank) * team.stride;
}

// Its index in this rank's LSA team, -1 if it is outside it.
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  const ncclTeam_t lsa = lsaTeamOf(toGrove(comm));
  const int index = ncclTeamRankToWorld(comm, team, rank) - (worldOf(comm).rank - lsa.rank);
  return index >= 0 && index < lsa.nRanks ? index : -1;
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

ncclResult_t ncclGinOutboxCreateRequirement(int, int, ncclGinOutboxHandle_t*,
                                            ncclDevResourceRequirements_t*) {
  return refuse(ncclInvalidUsage, "ncclGinOutboxCreateRequirement", kNoDeviceApi);
}

ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t, int, int, ncclGinInboxA2AHandle_t*,
                                              ncclDevResourceRequirements_t*) {
  return refuse(ncclInvalidUsage, "ncclGinInboxA2ACreateRequirement", kNoDeviceApi);
}

// No fabric tree (CFT): this rank's CFT team is itself alone.
ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t) {
  return ncclTeam_t{worldOf(comm).nRanks > 0 ? 1 : 0, 0, 1};
}
ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm) { return ncclTeamCft(comm, NCCL_CFT_TEAM_FLAT); }

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  return call("ncclCommQueryProperties", [&] {
    const char* fn = "ncclCommQueryProperties";
    if (props == nullptr) return refuse(ncclInvalidArgument, fn, "props is NULL");
    if (ncclResult_t r = checkMagic(fn, props->magic, "props", "NCCL_COMM_PROPERTIES_INITIALIZER");
        r != ncclSuccess)
      return r;
    const size_t size = props->size;
    if (size < offsetof(ncclCommProperties_t, railedGinType) + sizeof(ncclGinType_t))
      return refuse(ncclInvalidArgument, fn,
                    "props.size " + std::to_string(size) + " is smaller than any NCCL version's");
    int n = 0, r = 0, dev = -1;
    if (groveResult_t e = groveCommCount(toGrove(comm), &n); e != groveSuccess) return toNccl(e);
    if (groveResult_t e = groveCommUserRank(toGrove(comm), &r); e != groveSuccess) return toNccl(e);
    if (groveResult_t e = groveCommCuDevice(toGrove(comm), &dev); e != groveSuccess)
      return toNccl(e);
    ncclCommProperties_t p{};
    p.size = props->size;
    p.magic = props->magic;
    p.version = props->version;
    p.rank = r;
    p.nRanks = n;
    p.cudaDev = dev;
    p.nvmlDev = dev;  // grove keeps CUDA's device order
    p.ginType = p.railedGinType = NCCL_GIN_TYPE_NONE;
    const int lsaSize = lsaTeamOf(toGrove(comm)).nRanks;
    p.nLsaTeams = lsaSize > 0 ? n / lsaSize : n;  // all in this process: one team
    p.hostRmaSupport = dev < 0;  // put/signal: host memory and the emulated device (windows.cc)
    p.commHash = commHash(toGrove(comm));
    p.ginConnectionType = NCCL_GIN_CONNECTION_NONE;
    // Only the fields the caller's struct has (an older nccl.h's is shorter).
    std::memcpy(static_cast<void*>(props), &p, std::min(size, sizeof p));
    return ncclSuccess;
  });
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
GROVE_NCCL_PNAME(GinOutboxCreateRequirement);
GROVE_NCCL_PNAME(GinInboxA2ACreateRequirement);
GROVE_NCCL_PNAME(TeamCft);
GROVE_NCCL_PNAME(TeamCftMultimem);
GROVE_NCCL_PNAME(CommQueryProperties);
