#include "tools/common/launch_env.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "grove_build_info.h"

#if GROVE_HAVE_MPI
#include <mpi.h>
#endif

namespace grove::tools {
namespace {

thread_local std::string tLastError;

groveResult_t fail(groveResult_t code, const std::string& msg) {
  tLastError = msg;
  std::fprintf(stderr, "grove: %s\n", msg.c_str());
  return code;
}

// A launcher variable (not a GROVE_* one: those go through the config registry).
std::optional<std::string> launcherVar(const char* name) {
  const char* v = std::getenv(name);  // launcher variables are not Grove's config
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

bool parseInt(const std::string& text, int* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < INT32_MIN || v > INT32_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

// Fills env from (rank, size, local) variable texts; sets env.error on bad values.
void fromTexts(LaunchEnv* env, const std::string& source, const char* rankName,
               const std::string& rank, const char* sizeName, const std::string& size,
               const std::optional<std::string>& local) {
  env->source = source;
  if (!parseInt(rank, &env->rank) || !parseInt(size, &env->nranks) || env->nranks < 1 ||
      env->rank < 0 || env->rank >= env->nranks) {
    env->error = std::string("bad launcher variables ") + rankName + "=" + rank + " " + sizeName +
                 "=" + size + " (want 0 <= rank < size)";
    env->rank = 0;
    env->nranks = 1;
  }
  env->localRank = env->rank;
  if (local && !parseInt(*local, &env->localRank)) env->localRank = env->rank;
}

bool detectGrove(LaunchEnv* env) {
  std::string error;
  bool rankSet = false, nranksSet = false, localSet = false;
  // configValue checked each against its limits and wrote it in decimal.
  const std::optional<std::string> rank = configValue("GROVE_RANK", &rankSet, &error);
  const std::optional<std::string> nranks = configValue("GROVE_NRANKS", &nranksSet, &error);
  if (!rankSet && !nranksSet) return false;
  const std::optional<std::string> local = configValue("GROVE_LOCAL_RANK", &localSet, &error);
  env->source = "grove-launch";
  env->rank = rank ? std::atoi(rank->c_str()) : 0;
  env->nranks = nranks ? std::atoi(nranks->c_str()) : 0;
  env->localRank = local && localSet ? std::atoi(local->c_str()) : env->rank;
  env->error = error;
  if (env->error.empty() && (env->nranks < 1 || env->rank < 0 || env->rank >= env->nranks))
    env->error = "bad GROVE_RANK=" + std::to_string(env->rank) +
                 " GROVE_NRANKS=" + std::to_string(env->nranks) + " (want 0 <= rank < nranks)";
  if (!env->error.empty()) {
    env->rank = 0;
    env->nranks = 1;
    env->localRank = 0;
  }
  return true;
}

bool isMpiSource(const LaunchEnv& env) { return env.source == "openmpi" || env.source == "pmi"; }

groveResult_t idFromTorchrun(groveUniqueId* id) {
  auto addr = launcherVar("MASTER_ADDR");
  auto port = launcherVar("MASTER_PORT");
  int p = 0;
  if (!addr || !port || !parseInt(*port, &p) || p <= 0 || p >= 65535)
    return fail(groveInvalidUsage,
                "torchrun-style launch (RANK/WORLD_SIZE) without usable MASTER_ADDR/MASTER_PORT "
                "or GROVE_COMM_ID; set GROVE_COMM_ID=host:port");
  std::string commId = *addr + ":" + std::to_string(p + 1);
  if (commId.find(':') != commId.rfind(':')) commId = "[" + *addr + "]:" + std::to_string(p + 1);
  setenv("GROVE_COMM_ID", commId.c_str(), 1);  // read by the library's own config registry
  return groveGetUniqueId(id);
}

#if GROVE_HAVE_MPI
void finalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

groveResult_t idFromMpi(const LaunchEnv& env, groveUniqueId* id) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return fail(groveSystemError, "MPI_Init failed");
    std::atexit(finalizeMpi);
  }
  int mpiRank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpiRank);
  groveResult_t res = groveSuccess;
  if (mpiRank == 0) res = groveGetUniqueId(id);
  // Tell the others whether the id is usable before they wait on it.
  int ok = res == groveSuccess;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) return mpiRank == 0 ? res : fail(groveRemoteError, "rank 0 could not make a unique id");
  MPI_Bcast(id, sizeof(*id), MPI_BYTE, 0, MPI_COMM_WORLD);
  (void)env;
  return groveSuccess;
}
#endif

}  // namespace

LaunchEnv detectLaunchEnv() {
  LaunchEnv env;
  if (detectGrove(&env)) return env;
  if (auto r = launcherVar("OMPI_COMM_WORLD_RANK")) {
    fromTexts(&env, "openmpi", "OMPI_COMM_WORLD_RANK", *r, "OMPI_COMM_WORLD_SIZE",
              launcherVar("OMPI_COMM_WORLD_SIZE").value_or(""),
              launcherVar("OMPI_COMM_WORLD_LOCAL_RANK"));
    return env;
  }
  if (auto r = launcherVar("PMI_RANK")) {
    fromTexts(&env, "pmi", "PMI_RANK", *r, "PMI_SIZE", launcherVar("PMI_SIZE").value_or(""),
              launcherVar("MPI_LOCALRANKID"));
    return env;
  }
  if (auto r = launcherVar("RANK"); r && launcherVar("WORLD_SIZE")) {
    fromTexts(&env, "torchrun", "RANK", *r, "WORLD_SIZE", *launcherVar("WORLD_SIZE"),
              launcherVar("LOCAL_RANK"));
    return env;
  }
  return env;
}

groveResult_t uniqueIdFromEnv(const LaunchEnv& env, groveUniqueId* id) {
  tLastError.clear();
  if (!env.error.empty()) return fail(groveInvalidArgument, env.error);
  groveResult_t res = groveSuccess;
  std::string error;
  bool commIdSet = false;
  const std::optional<std::string> commId = configValue("GROVE_COMM_ID", &commIdSet, &error);
  if (!commId) return fail(groveInvalidArgument, error);
  if (commIdSet && !commId->empty()) {
    res = groveGetUniqueId(id);  // names GROVE_COMM_ID on every rank
  } else if (env.source == "torchrun") {
    res = idFromTorchrun(id);
  } else if (isMpiSource(env) && env.nranks > 1) {
#if GROVE_HAVE_MPI
    res = idFromMpi(env, id);
#else
    return fail(groveInvalidUsage,
                "launched by mpirun (" + env.source + ", " + std::to_string(env.nranks) +
                    " ranks) but this build of Grove has no MPI support, so ranks cannot share a "
                    "unique id; set GROVE_COMM_ID=host:port (an address of the host of rank 0 "
                    "and a free port), e.g. mpirun -x GROVE_COMM_ID=node0:29500 ...");
#endif
  } else if (env.nranks > 1) {
    return fail(groveInvalidUsage, std::to_string(env.nranks) + " ranks (from " + env.source +
                                       ") but GROVE_COMM_ID is not set; set "
                                       "GROVE_COMM_ID=host:port of rank 0");
  } else {
    res = groveGetUniqueId(id);
  }
  if (res != groveSuccess && tLastError.empty())
    return fail(res, std::string("groveGetUniqueId failed: ") + groveGetErrorString(res) + ": " +
                         groveGetLastError(nullptr));
  return res;
}

groveResult_t initCommFromEnv(const LaunchEnv& env, groveComm_t* comm, groveConfig_t* cfg) {
  groveUniqueId id{};
  groveResult_t res = uniqueIdFromEnv(env, &id);
  if (res != groveSuccess) return res;
  res = groveCommInitRankConfig(comm, env.nranks, id, env.rank, cfg);
  if (res != groveSuccess)
    return fail(res, "rank " + std::to_string(env.rank) + ": groveCommInitRankConfig failed: " +
                         groveGetErrorString(res) + ": " + groveGetLastError(nullptr));
  return res;
}

std::optional<std::string> configValue(const char* name, bool* set, std::string* error) {
  char value[4096];  // more than any GROVE_* value needs (host:port, names, lists)
  int isSet = 0;
  if (groveGetConfig(name, value, sizeof value, &isSet) != groveSuccess) {
    if (set != nullptr) *set = true;  // every default is valid: a refused value was set
    if (error != nullptr && error->empty()) *error = groveGetLastError(nullptr);
    return std::nullopt;
  }
  if (set != nullptr) *set = isSet != 0;
  return std::string(value);
}

const char* launchEnvLastError() { return tLastError.c_str(); }

}  // namespace grove::tools
