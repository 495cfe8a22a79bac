// The execution context the device interpreter (dev_lane.h) runs in: one
// "team" of threads that runs one lane. On a GPU the team is a thread block
// (exec/cuda/); in the host emulation (emulate.h) it is one CPU thread.
//
// The interpreter is a template over the context, so the same code runs on
// both; GROVE_HD marks what both compilers build.
//
// A context type Ctx provides (all callable from GROVE_HD code):
//
//   uint32_t tid() const;                 this thread's index in the team
//   uint32_t size() const;                the team's thread count
//   void sync();                          team barrier (__syncthreads)
//   uint64_t share(uint64_t v);           team barrier; every thread returns
//                                         thread 0's v
//   uint64_t loadAcquire(const uint64_t* p);   system-scope acquire load
//   uint32_t loadFlag(const uint32_t* p);      system-scope relaxed load
//   void storeRelease(uint64_t* p, uint64_t v);  system-scope release store
//   void fenceRelease();                  makes this thread's data stores
//                                         visible system-wide before a later
//                                         release by thread 0 (every thread
//                                         calls it before the sync that
//                                         precedes a publish)
//   bool claimStatus(uint32_t* status, uint32_t value);
//                                         atomically sets *status from 0 to
//                                         value (system scope); true if this
//                                         call set it (first failure wins)
//   uint64_t nowNs();                     a monotonic clock in ns
//   void pause(uint32_t spins);           back off while waiting (spins =
//                                         consecutive empty polls so far)
//   void copy(void* dst, const void* src, uint64_t bytes);
//                                         team-wide memcpy (any alignment)
//   void reduce(const DevReduce& r, void* dst, void* dst2,
//               const void* const* srcs, int nsrc, uint64_t count, bool final);
//                                         team-wide: dst (and dst2 when not
//                                         null) = srcs[0] op ... op srcs[nsrc-1],
//                                         folded left, `final` on the last step
//                                         (avg divides by r.nranks), 2 <= nsrc
//                                         <= 1 + kMaxStepLinks; count elements
//                                         of r.dtype; dst may equal a source
//
// Every team-wide call is made by all threads of the team with the same
// arguments.
#pragma once

#if defined(__CUDACC__)
#define GROVE_HD __host__ __device__
#define GROVE_HD_INLINE __host__ __device__ __forceinline__
#else
#define GROVE_HD
#define GROVE_HD_INLINE inline
#endif
