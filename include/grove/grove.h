/*
 * grove.h - the public C API of Grove, a topology-aware collective
 * communication library.
 *
 * The API is shaped like NCCL's: a communicator is created from a unique id
 * that one rank makes and every rank receives, and collectives take a stream.
 * Enumerator values of data types, reduction ops and result codes equal
 * NCCL's, so a thin NCCL-ABI shim can sit on top.
 *
 * Streams: for a communicator on host memory (the default device kind) the
 * stream argument is either NULL, which makes the call blocking, or a
 * groveHostStream_t, which makes it asynchronous and in order with the other
 * work on that stream. For a CUDA communicator it is a cudaStream_t.
 *
 * This header is C99 and needs no other header than the C standard ones.
 */
#ifndef GROVE_GROVE_H_
#define GROVE_GROVE_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GROVE_MAJOR 0
#define GROVE_MINOR 1
#define GROVE_PATCH 0
/// Version code: major * 10000 + minor * 100 + patch.
#define GROVE_VERSION_CODE (GROVE_MAJOR * 10000 + GROVE_MINOR * 100 + GROVE_PATCH)

/// Size in bytes of a groveUniqueId (equal to NCCL_UNIQUE_ID_BYTES).
#define GROVE_UNIQUE_ID_BYTES 128

/// The enums below are int-sized in C and C++ alike. In C++ their underlying
/// type is fixed to int, so any int a caller passes (a bad data type from C,
/// say) is a valid value the library can refuse, not undefined behaviour.
#ifdef __cplusplus
#define GROVE_ENUM_INT : int
#else
#define GROVE_ENUM_INT
#endif

/// Opaque token that lets ranks find each other: made by one rank with
/// groveGetUniqueId and handed to all others out of band (MPI, a file, ...).
typedef struct {
  char internal[GROVE_UNIQUE_ID_BYTES];
} groveUniqueId;

/// Result codes; values equal ncclResult_t's.
typedef enum GROVE_ENUM_INT {
  groveSuccess = 0,             ///< the call did what it was asked
  groveUnhandledCudaError = 1,  ///< a CUDA call failed
  groveSystemError = 2,         ///< an operating-system call failed
  groveInternalError = 3,       ///< a bug in Grove
  groveInvalidArgument = 4,     ///< a bad argument (null pointer, bad type, ...)
  groveInvalidUsage = 5,        ///< a call made in the wrong state (destroyed comm, ...)
  groveRemoteError = 6,         ///< a peer failed, died, or did not answer in time
  groveInProgress = 7,          ///< a non-blocking operation has not finished yet
  groveNumResults = 8
} groveResult_t;

/// Element types; values equal ncclDataType_t's.
typedef enum GROVE_ENUM_INT {
  groveInt8 = 0,
  groveChar = 0,
  groveUint8 = 1,
  groveInt32 = 2,
  groveInt = 2,
  groveUint32 = 3,
  groveInt64 = 4,
  groveUint64 = 5,
  groveFloat16 = 6,
  groveHalf = 6,
  groveFloat32 = 7,
  groveFloat = 7,
  groveFloat64 = 8,
  groveDouble = 8,
  groveBfloat16 = 9,
  groveNumTypes = 10
} groveDataType_t;

/// Reduction operators; values equal ncclRedOp_t's. groveAvg divides the sum
/// by the number of ranks (integer division for integer types).
typedef enum GROVE_ENUM_INT {
  groveSum = 0,
  groveProd = 1,
  groveMax = 2,
  groveMin = 3,
  groveAvg = 4,
  groveNumOps = 5
} groveRedOp_t;

/// Where a communicator's buffers live.
typedef enum GROVE_ENUM_INT {
  groveDeviceHost = 0,  ///< host memory, CPU kernels (the default)
  groveDeviceCuda = 1   ///< CUDA device memory (needs a CUDA build and a GPU)
} groveDeviceKind_t;

/// Opaque communicator handle.
typedef struct groveComm* groveComm_t;

/// Opaque asynchronous in-order host stream (see groveHostStreamCreate).
typedef struct groveHostStream* groveHostStream_t;

/// Stream argument of the collectives: NULL, a groveHostStream_t (host
/// communicators) or a cudaStream_t (CUDA communicators).
typedef void* groveStream_t;

/// Marks a config field as "not set: use the default or the environment".
#define GROVE_CONFIG_UNDEF_INT INT_MIN
/// Marks a config pointer field as "not set".
#define GROVE_CONFIG_UNDEF_PTR NULL
/// Magic number of groveConfig_t ("grov").
#define GROVE_CONFIG_MAGIC 0x67726f76u

/// Communicator configuration; initialise with GROVE_CONFIG_INITIALIZER and
/// set only the fields you need. size/magic/version let the library accept
/// configs from older headers.
typedef struct groveConfig_v1 {
  size_t size;           ///< sizeof(groveConfig_t); set by the initializer
  unsigned int magic;    ///< GROVE_CONFIG_MAGIC; set by the initializer
  unsigned int version;  ///< GROVE_VERSION_CODE; set by the initializer
  int deviceKind;        ///< groveDeviceHost (default) or groveDeviceCuda
  int device;            ///< CUDA device ordinal; unset = the current device
  int blocking;          ///< 1 (default): init and calls block; 0: they may return groveInProgress
  int timeoutMs;         ///< how long a wait may last before it fails; unset = GROVE_TIMEOUT
  int nChannels;         ///< parallel channels per collective; unset = GROVE_NCHANNELS
  /// "auto" or transport names, comma-separated ("shm", "net", "socket"); unset = GROVE_TRANSPORT
  const char* transport;
  const char* algo;      ///< algorithm override, e.g. "allreduce:ring"; unset = GROVE_ALGO
  const char* commName;  ///< a name used in logs; unset = none
} groveConfig_t;

/// Initializer for groveConfig_t: every user field unset.
#define GROVE_CONFIG_INITIALIZER                                                           \
  {                                                                                        \
    sizeof(groveConfig_t), GROVE_CONFIG_MAGIC, GROVE_VERSION_CODE, GROVE_CONFIG_UNDEF_INT, \
        GROVE_CONFIG_UNDEF_INT, GROVE_CONFIG_UNDEF_INT, GROVE_CONFIG_UNDEF_INT,            \
        GROVE_CONFIG_UNDEF_INT, GROVE_CONFIG_UNDEF_PTR, GROVE_CONFIG_UNDEF_PTR,            \
        GROVE_CONFIG_UNDEF_PTR                                                             \
  }

/// Writes the library's version code (GROVE_VERSION_CODE) to *version.
groveResult_t groveGetVersion(int* version);

/// Text of a result code (never NULL).
const char* groveGetErrorString(groveResult_t result);

/// The value the library reads for configuration variable `name` (any
/// GROVE_* variable grove-info lists), as text: the environment's when it
/// is set, else the default, checked against the variable's type and limits
/// and written in a canonical form (integers and sizes in decimal, booleans
/// as "1" or "0", strings with choices as the choice is spelled). *isSet (if
/// isSet is not NULL) is 1 when the environment sets the variable to a
/// non-empty value (an empty value means the default).
/// groveInvalidArgument: name or value NULL, an unknown name, a value the
/// variable refuses, or `len` too small for the text and its NUL
/// (groveGetLastError(NULL) says which). Programs built on grove read
/// GROVE_* variables through this call, so they agree with the library.
groveResult_t groveGetConfig(const char* name, char* value, size_t len, int* isSet);

/// Detail of the last error raised on this thread (or by a communicator if
/// comm is not NULL), e.g. "groveAllReduce: root 7 out of range [0,4)".
/// Never NULL; an empty string when there is nothing to report.
const char* groveGetLastError(groveComm_t comm);

/// Makes a unique id on the rank that will be rank 0. It starts the bootstrap
/// root that the other ranks contact, and holds a random secret that ranks
/// must present. If GROVE_COMM_ID=host:port is set, the id names that address
/// instead and rank 0 starts the root there during init.
groveResult_t groveGetUniqueId(groveUniqueId* uniqueId);

/// Creates this process's rank of a communicator of nranks ranks. Collective:
/// every rank must call it with the same id. Blocks until all ranks joined
/// (or the timeout passed).
groveResult_t groveCommInitRank(groveComm_t* comm, int nranks, groveUniqueId commId, int rank);

/// As groveCommInitRank, with a configuration (may be NULL).
groveResult_t groveCommInitRankConfig(groveComm_t* comm, int nranks, groveUniqueId commId, int rank,
                                      groveConfig_t* config);

/// Creates ndev communicators in one process, one per thread or device.
/// For host communicators devlist may be NULL; for CUDA ones it names the
/// devices (NULL = devices 0..ndev-1). Uses the default configuration
/// (host memory unless GROVE_DEVICE_KIND says otherwise and devlist is given).
groveResult_t groveCommInitAll(groveComm_t* comms, int ndev, const int* devlist);

/// Waits for pending work, releases the communicator's resources and frees it.
groveResult_t groveCommDestroy(groveComm_t comm);

/// Stops the communicator at once: pending and future calls on every rank
/// fail with an error; resources are freed without waiting for peers.
groveResult_t groveCommAbort(groveComm_t comm);

/// Splits comm into sub-communicators by color; ranks are ordered by key,
/// then by their rank in comm. color GROVE_SPLIT_NOCOLOR (negative) gives
/// *newcomm = NULL. Collective over comm.
groveResult_t groveCommSplit(groveComm_t comm, int color, int key, groveComm_t* newcomm,
                             groveConfig_t* config);
/// Color that leaves a rank out of every new communicator of groveCommSplit.
#define GROVE_SPLIT_NOCOLOR (-1)

/// Elastic communicators: shrink after a failure, grow back, revoke.
///
/// Makes *newcomm of every rank of comm that is not in excludeRanks (its
/// excludeCount ranks of comm); ranks keep their order. Only the ranks that
/// stay call it (the excluded ones may be dead), with the same list, and
/// shrinks of one comm come in the same order on every caller. The new
/// communicator is planned for its own members; neither the excluded ranks
/// nor comm's bootstrap root take part (the lowest rank that stays hosts the
/// new root). GROVE_SHRINK_DEFAULT: comm must be healthy; this rank's queued
/// work on it finishes first. GROVE_SHRINK_ABORT: for after a failure or a
/// groveCommRevoke: this rank's pending work on comm is aborted first. comm
/// stays to be destroyed (after an abort-mode shrink it only fails calls).
/// config NULL: comm's configuration; a non-blocking one returns
/// groveInProgress as init does.
groveResult_t groveCommShrink(groveComm_t comm, const int* excludeRanks, int excludeCount,
                              groveComm_t* newcomm, groveConfig_t* config, int flags);
#define GROVE_SHRINK_DEFAULT 0x00
#define GROVE_SHRINK_ABORT 0x01

/// Every pending and later call on comm, on every rank, ends with an error
/// that names this rank (told through comm's bootstrap root while it lives;
/// a rank that cannot hear it fails on its own when a peer leaves). Does not
/// wait. Then shrink comm (GROVE_SHRINK_ABORT) or destroy it. flags: 0.
groveResult_t groveCommRevoke(groveComm_t comm, int flags);
#define GROVE_REVOKE_DEFAULT 0x00

/// An id for groveCommGrow, made by one rank of comm (its bootstrap root
/// runs in this process until the grown communicator ends).
groveResult_t groveCommGetUniqueId(groveComm_t comm, groveUniqueId* uniqueId);
/// Makes a communicator of nranks ranks: comm's ranks, each keeping its rank
/// (they call it with comm and rank -1, collectively over comm, and at least
/// the rank that made the id passes it; the others may pass NULL), and new
/// ranks nranks(comm) .. nranks-1 (they call it with comm NULL, the id and
/// their rank). config NULL: comm's configuration (the default for a new rank).
groveResult_t groveCommGrow(groveComm_t comm, int nranks, const groveUniqueId* uniqueId, int rank,
                            groveComm_t* newcomm, groveConfig_t* config);

/// A value every rank of comm reads alike and other communicators differ
/// in (from the nonce of the id it was made from): to tell communicators apart.
groveResult_t groveCommGetHash(const groveComm_t comm, uint64_t* hash);

/// Number of ranks of comm.
groveResult_t groveCommCount(const groveComm_t comm, int* count);

/// This process's rank in comm.
groveResult_t groveCommUserRank(const groveComm_t comm, int* rank);

/// The CUDA device of comm, or -1 for a host communicator (and for an emulated device).
groveResult_t groveCommCuDevice(const groveComm_t comm, int* device);

/// Error state of comm: groveSuccess, groveInProgress (non-blocking init or
/// call still running), or the error a background activity or a peer caused.
groveResult_t groveCommGetAsyncError(groveComm_t comm, groveResult_t* asyncError);

/// Memory one rank holds for a communicator, in bytes (device memory for a
/// CUDA communicator, host memory standing in for it when emulated; a host
/// communicator reports 0 for both).
typedef struct {
  uint64_t releasable;  ///< scratch, grown by calls: what groveCommSuspend gives back
  uint64_t persistent;  ///< rings shared with peers: held until destroy or abort
  int suspended;        ///< 1 between groveCommSuspend and groveCommResume
} groveCommMemory_t;
groveResult_t groveCommMemory(groveComm_t comm, groveCommMemory_t* memory);

/// Waits for this rank's queued work on comm (and every launch it enqueued on
/// a stream), then frees the communicator's scratch memory. Until
/// groveCommResume every call on comm fails with groveInvalidUsage
/// ("suspended"). Local to this rank; not inside a group.
groveResult_t groveCommSuspend(groveComm_t comm);
/// Ends a suspension; the scratch is allocated again as calls need it.
/// groveInvalidUsage if comm is not suspended.
groveResult_t groveCommResume(groveComm_t comm);

/// One-sided access: windows, puts with a signal, and waits for signals
/// (host communicators and the emulated device; not GPU memory).
///
/// Registers [buff, buff + bytes) as this rank's window on comm; *window is
/// this rank's handle of it (unique in the process and never reused: a
/// handle of another communicator, or of a deregistered window, is
/// refused). Collective: every rank registers its k-th window in the same
/// call (sizes may differ per rank), and a put with this rank's handle of
/// the k-th window writes into the peer's k-th window. Every rank must make
/// the same calls: one refused on this rank alone (a NULL handle pointer,
/// not a suspension) still counts, and a registration whose count differs
/// across ranks fails the communicator on every rank (groveInvalidUsage)
/// rather than pair windows registered in different calls. Not inside a
/// group.
groveResult_t groveWindowRegister(groveComm_t comm, void* buff, size_t bytes, int* window);
/// Collective: waits until every put made into this rank's windows before
/// the call has landed, then drops the window. Not inside a group.
groveResult_t groveWindowDeregister(groveComm_t comm, int window);

/// Signal slots each rank has per peer.
#define GROVE_MAX_SIGNALS 1024

/// Writes `bytes` from src into peer's window `window` at byte `offset`,
/// then raises signal slot `signal` (0 <= signal < GROVE_MAX_SIGNALS) of
/// this rank on peer. The peer calls nothing for it: its progress thread
/// applies the bytes, then counts the signal. Puts from one rank to one
/// peer land in call order. The call (on a stream: its operation) completes
/// once src may be reused. bytes 0 (src may be NULL): the signal alone,
/// for which window may be -1 (once comm has any window).
/// A put outside the peer's window is refused here (groveInvalidArgument).
groveResult_t grovePutSignal(const void* src, size_t bytes, int peer, int window, size_t offset,
                             int signal, groveComm_t comm, groveStream_t stream);

/// One wait of groveWaitSignal: `count` signals of slot `signal` from `peer`.
typedef struct {
  int peer;
  int signal;
  int count;
} groveSignalWait_t;
/// Waits until, for every entry, `count` more signals have arrived than
/// earlier waits consumed, then consumes them (the bytes of their puts are
/// then in the window). Fails with groveRemoteError if a peer it waits for
/// is gone, or after GROVE_TIMEOUT without a signal.
groveResult_t groveWaitSignal(const groveSignalWait_t* waits, int nwaits, groveComm_t comm,
                              groveStream_t stream);

/// All-reduce: recvbuff[i] = op over ranks of sendbuff[i], on every rank.
/// In place when sendbuff == recvbuff.
groveResult_t groveAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             groveDataType_t datatype, groveRedOp_t op, groveComm_t comm,
                             groveStream_t stream);

/// Broadcast: count elements of root's sendbuff to every rank's recvbuff.
/// In place when sendbuff == recvbuff (sendbuff is read on root only).
groveResult_t groveBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             groveDataType_t datatype, int root, groveComm_t comm,
                             groveStream_t stream);

/// Reduce: root's recvbuff[i] = op over ranks of sendbuff[i]. recvbuff is
/// used on root only. In place when sendbuff == recvbuff.
groveResult_t groveReduce(const void* sendbuff, void* recvbuff, size_t count,
                          groveDataType_t datatype, groveRedOp_t op, int root, groveComm_t comm,
                          groveStream_t stream);

/// All-gather: recvbuff (nranks*sendcount elements) holds every rank's
/// sendbuff in rank order. In place when sendbuff == recvbuff + rank*sendcount.
groveResult_t groveAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             groveDataType_t datatype, groveComm_t comm, groveStream_t stream);

/// Reduce-scatter: recvbuff (recvcount elements) on rank r holds block r of
/// the reduction of every rank's sendbuff (nranks*recvcount elements).
/// In place when recvbuff == sendbuff + rank*recvcount.
groveResult_t groveReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 groveDataType_t datatype, groveRedOp_t op, groveComm_t comm,
                                 groveStream_t stream);

/// Gather: root's recvbuff (nranks*sendcount elements) holds every rank's
/// sendbuff in rank order. In place on root when sendbuff == recvbuff + root*sendcount.
groveResult_t groveGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                          groveDataType_t datatype, int root, groveComm_t comm,
                          groveStream_t stream);

/// Scatter: rank r's recvbuff (recvcount elements) gets block r of root's
/// sendbuff. In place on root when recvbuff == sendbuff + root*recvcount.
groveResult_t groveScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                           groveDataType_t datatype, int root, groveComm_t comm,
                           groveStream_t stream);

/// All-to-all: block j (count elements) of rank i's sendbuff goes to block i
/// of rank j's recvbuff. In place when sendbuff == recvbuff; any other
/// overlap is refused.
groveResult_t groveAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                            groveDataType_t datatype, groveComm_t comm, groveStream_t stream);

/// Sends count elements to peer; matched by a groveRecv on peer of the same
/// size. Sends and receives between one pair of ranks match in call order,
/// one by one (a host communicator refuses a receive whose size differs
/// from its send's, in a group of several too).
groveResult_t groveSend(const void* sendbuff, size_t count, groveDataType_t datatype, int peer,
                        groveComm_t comm, groveStream_t stream);

/// Receives count elements from peer.
groveResult_t groveRecv(void* recvbuff, size_t count, groveDataType_t datatype, int peer,
                        groveComm_t comm, groveStream_t stream);

/// Starts a group: calls up to the matching groveGroupEnd are queued and run
/// together (sends and receives then progress concurrently). Groups nest.
groveResult_t groveGroupStart(void);

/// Ends a group and runs what it queued. If a call was refused while the
/// group was open (a bad argument, a suspended communicator, ...), none of
/// the group's calls runs and the end fails with the first refusal (NCCL's
/// group error); communicators created in the group fail, the others stay
/// usable. Every rank must then leave out the same group, as after a call
/// refused outside a group.
groveResult_t groveGroupEnd(void);

/// For libraries built on grove that refuse a call of their own inside an
/// open group (grove's NCCL library): the group then fails at its end as if
/// grove had refused the call (`result`, `reason`; `comm`, if not NULL, the
/// refused call's communicator, gets the text as its last error; an unknown
/// one is ignored). Outside a group it does nothing; a `result` that is not
/// a failure or a NULL `reason` is refused.
groveResult_t groveGroupFail(groveComm_t comm, groveResult_t result, const char* reason);

/// Creates an asynchronous in-order host stream with its own worker thread.
groveResult_t groveHostStreamCreate(groveHostStream_t* stream);

/// Waits until every call queued on stream has finished; returns the first
/// error any of them raised since the last synchronize (and clears it).
groveResult_t groveHostStreamSynchronize(groveHostStream_t stream);

/// groveSuccess if every call queued on stream has finished, groveInProgress
/// if some have not, or the first error raised.
groveResult_t groveHostStreamQuery(groveHostStream_t stream);

/// Waits for the stream's work, then destroys it.
groveResult_t groveHostStreamDestroy(groveHostStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GROVE_GROVE_H_ */
