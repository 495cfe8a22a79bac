// Where this process sits in a job, and how to make its communicator.
//
// Every Grove program (perf binaries, examples, tools) starts the same way:
// find its rank from whatever launched it, then make a communicator without
// the user passing a unique id by hand. Launchers are recognised, in order:
//   grove-launch   GROVE_RANK / GROVE_NRANKS / GROVE_LOCAL_RANK (+ GROVE_COMM_ID)
//   Open MPI       OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK
//   MPICH (PMI)    PMI_RANK / PMI_SIZE (MPI_LOCALRANKID)
//   torchrun       RANK / WORLD_SIZE / LOCAL_RANK (+ MASTER_ADDR / MASTER_PORT)
//   nothing        a single rank
// The unique id then comes from GROVE_COMM_ID when it is set (every rank
// calls groveGetUniqueId, which names that address); under torchrun from
// MASTER_ADDR:(MASTER_PORT+1), exported as GROVE_COMM_ID; under mpirun from
// rank 0 through MPI_Bcast (only in builds with MPI); for a single rank it is
// made locally.
#pragma once

#include <optional>
#include <string>

#include "grove/grove.h"

namespace grove::tools {

/// This process's place in the job.
struct LaunchEnv {
  int rank = 0;                   ///< global rank
  int nranks = 1;                 ///< number of ranks (processes)
  int localRank = 0;              ///< rank among the ranks of this host
  std::string source = "single";  ///< "grove-launch", "openmpi", "pmi", "torchrun" or "single"
  std::string error;              ///< non-empty when the launcher's variables are malformed
};

/// Reads the launcher's variables (see the file comment). Never fails: bad
/// values are reported in LaunchEnv::error and make initCommFromEnv fail.
LaunchEnv detectLaunchEnv();

/// Makes the unique id every rank of the job passes to groveCommInitRank*.
/// Collective over the job's processes (MPI_Bcast under mpirun). On failure
/// the reason is printed to stderr and kept for launchEnvLastError().
groveResult_t uniqueIdFromEnv(const LaunchEnv& env, groveUniqueId* id);

/// uniqueIdFromEnv + groveCommInitRankConfig(comm, env.nranks, id, env.rank, cfg).
/// cfg may be NULL.
groveResult_t initCommFromEnv(const LaunchEnv& env, groveComm_t* comm, groveConfig_t* cfg);

/// The value libgrove reads for the GROVE_* variable `name`, through
/// groveGetConfig: checked against the variable's type and limits, in
/// canonical text (integers in decimal, booleans "1"/"0"), the default when
/// unset. *set (if not null) says whether the environment sets it. A value
/// the library refuses gives nullopt, *set true, and, when *error is empty,
/// the library's reason in *error (if not null).
std::optional<std::string> configValue(const char* name, bool* set, std::string* error);

/// Text of the last failure of uniqueIdFromEnv / initCommFromEnv on this
/// thread (its own message, or the library's groveGetLastError text).
const char* launchEnvLastError();

}  // namespace grove::tools
