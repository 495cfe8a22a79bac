// The driver shared by the peer harnesses (Open MPI, MPICH, Gloo): grove's
// perf driver (perf/common/harness.*) with the library call swapped out, so a
// peer is timed on the same sizes, the same data and the same columns.
//
// How it works: a harness is `<peer>_perf <collective> [nccl-tests flags]`.
// peerMain strips the collective name and the harness's own options, parses
// the rest with grove's parsePerfArgs, asks the PeerBackend to start (MPI_Init,
// Gloo rendezvous), and then runs exactly grove's loop: per type x op x root x
// size, warm-up calls, -n timed iterations (buffers shifted through the -e
// sized allocation as nccl-tests does), the time combined across ranks (-a)
// with the peer itself, then -c checked calls against verify.h's exact data,
// the wrong elements summed across ranks. Every collective the driver needs
// for itself (barrier, time, error count, device lines) goes through the
// peer's own all-reduce / all-gather. A variant the peer cannot express
// (e.g. MPI_Bcast out of place) prints N/A; a setting it cannot run at all
// (a type or op it lacks) is an error before anything is timed. Rank 0
// prints; the exit status is non-zero when a value was wrong or a call
// failed.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "grove/grove.h"
#include "perf/common/coll_spec.h"

namespace grove::perf::compare {

/// One peer library as the driver sees it: started, asked to run one call
/// with nccl-tests' argument conventions, stopped.
class PeerBackend {
 public:
  virtual ~PeerBackend() = default;

  /// Starts the library (collective over the job); throws std::runtime_error.
  virtual void start() = 0;
  /// Stops it (collective over the job).
  virtual void stop() = 0;
  /// Abandons the job after a failure (MPI_Abort; Gloo: nothing).
  virtual void abort() = 0;

  /// This process's rank and the job's size (valid after start()).
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// "Open MPI 4.1.4", "MPICH 4.0.2", "Gloo 0.5.0 (tcp)", ...
  virtual std::string describe() const = 0;

  /// Empty when the peer can run `kind` on this type and op, else why not.
  virtual std::string unsupported(CollKind kind, groveDataType_t type, groveRedOp_t op) const = 0;
  /// True when the in-place (inPlace) or out-of-place variant of `kind` exists.
  virtual bool hasVariant(CollKind kind, bool inPlace) const = 0;

  /// One blocking call. send/recv follow nccl-tests: in place, send and recv
  /// point into the same buffer at the offsets of coll_spec.h. count is the
  /// call's count (per rank for all-gather and reduce-scatter). Throws
  /// std::runtime_error on failure.
  virtual void run(CollKind kind, const void* send, void* recv, size_t count, groveDataType_t type,
                   groveRedOp_t op, int root, bool inPlace) = 0;
};

/// Options of a harness beyond nccl-tests' flags (`--name value` pairs that
/// peerMain strips before parsing); the backend factory reads them.
struct PeerOptions {
  std::string storeDir;  ///< --store DIR: Gloo FileStore rendezvous directory
  std::string iface;     ///< --iface NAME: Gloo TCP device interface (default lo)
};

/// Runs harness `prog` for the collective named in argv[1]; returns the exit
/// status. makeBackend builds the peer from the parsed harness options.
int peerMain(int argc, char** argv,
             std::unique_ptr<PeerBackend> (*makeBackend)(const PeerOptions& options));

/// Parses a collective name as the perf binaries are named ("all_reduce",
/// "allreduce", "all_reduce_perf", ...). Returns false when unknown.
bool parseCollName(const std::string& name, CollKind* kind);

}  // namespace grove::perf::compare
