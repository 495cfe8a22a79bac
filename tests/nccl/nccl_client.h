// What the parts of nccl_client (nccl_client.cc: see there) share: NCCL's
// header as the build names it, the device API's host side, and the
// checks' tally and helpers (nccl_client_util.cc).
#pragma once

#include NCCL_CLIENT_HEADER

#ifndef NCCL_VERSION_CODE  // the shim's header names it so
#define NCCL_VERSION_CODE GROVE_NCCL_VERSION_CODE
#elif NCCL_VERSION_CODE >= 23000
#include <nccl_device.h>  // the device API's host side, ncclCommProperties_t
#endif

#include <cstddef>
#include <cstdint>
#include <string>

// The host side of NCCL's device API: grove's nccl_abi.h declares it;
// NCCL's nccl.h does not (nccl_device.h, which needs CUDA's headers), so
// against nccl.h it is declared here with its C layout.
#if defined(GROVE_NCCL_VERSION_CODE) || NCCL_VERSION_CODE >= 23000
using ClientTeam = ncclTeam_t;
using ClientDevComm = ncclDevComm_t;
#else
extern "C" {
struct ClientTeam {
  int nRanks, rank, stride;
};
struct ClientDevComm;
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, ClientDevComm* outDevComm);
ClientTeam ncclTeamWorld(ncclComm_t comm);
ClientTeam ncclTeamLsa(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, ClientTeam team, int rank);
}
#endif

namespace nccl_client {

extern int rank, nranks, checks, failures;

/// Counts a check; prints the first 20 that fail.
void expect(bool ok, const std::string& what);
/// Asserts a call's result; on an error, names it with ncclGetLastError.
bool ok(ncclResult_t r, const char* what, ncclComm_t comm = nullptr);

inline const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                        ncclInt64,   ncclUint64,  ncclFloat16, ncclFloat32,
                                        ncclFloat64, ncclBfloat16};
inline const char* const kTypeNames[] = {"int8",   "uint8", "int32", "uint32", "int64",
                                         "uint64", "half",  "float", "double", "bfloat16"};

size_t bytesOf(ncclDataType_t t);
/// Writes a small non-negative integer (exact in every type) as type t.
void put(void* base, size_t i, ncclDataType_t t, double v);
/// Whether element ai of a and element bi of b are the same bytes.
bool same(const void* a, size_t ai, const void* b, size_t bi, ncclDataType_t t);
/// The value rank r contributes at index i: 1..3 on ranks 1.., and on rank
/// 0 what makes the sum a multiple of n (exact averages, integer or not).
double value(int r, size_t i);
/// The reduction of every rank's value(r, i) by op.
double reduceOf(ncclRedOp_t op, size_t i);

/// A communicator that takes no work (`state`: "finalized", "suspended")
/// makes nothing either: no split, registration or PreMulSum op, each
/// refused with ncclInvalidUsage naming the state.
void expectMakesNothing(ncclComm_t comm, const std::string& state);

#if NCCL_VERSION_CODE >= 23000
/// What NCCL 2.30 added (and 2.32 after it), on a working communicator
/// (nccl_client_current.cc).
void currentApi(ncclComm_t comm);
/// Two ranks of one process (ncclCommInitAll): their windows and LSA team.
void sameProcessWindows(ncclComm_t* two);
#endif

}  // namespace nccl_client
