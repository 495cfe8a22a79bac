// The library's GROVE_* variables, with their type, default, help text and
// what values they allow (choices of a string; [min, max] of a number or
// size). grove-info prints this table and the components' own (a
// transport's variables live in its folder: config::VarTable); add a line
// here, or to the component's table, before reading a new variable.
#include "base/config.h"

namespace grove::config {

const std::vector<Var>& registeredVars() {
  static const std::vector<Var> vars = {
      // Logging
      {"GROVE_DEBUG", Type::kString, "WARN", "log level: NONE, WARN, INFO or TRACE",
       "NONE|WARN|INFO|TRACE"},
      {"GROVE_DEBUG_SUBSYS", Type::kString, "ALL",
       "comma list of subsystems to log (INIT,TOPO,PLAN,SHM,NET,P2P,COLL,BOOT,ALL); ^ excludes"},
      {"GROVE_DEBUG_FILE", Type::kString, "",
       "write logs to this file instead of stderr; %h = host name, %p = pid"},
      // Bootstrap and networking
      {"GROVE_COMM_ID", Type::kString, "",
       "host:port of the bootstrap root; lets ranks start without passing a unique id (needs "
       "GROVE_COMM_SECRET or GROVE_COMM_SECRET_FILE)"},
      {"GROVE_COMM_SECRET", Type::kString, "",
       "the job's secret when GROVE_COMM_ID is used: the same random text on every rank (at least "
       "16 characters; grove-launch sets one). Ranks prove they hold it without sending it"},
      {"GROVE_COMM_SECRET_FILE", Type::kString, "",
       "a file whose first line is the job's secret (instead of GROVE_COMM_SECRET)"},
      {"GROVE_SOCKET_IFNAME", Type::kString, "",
       "network interfaces to use: prefix list, ^ to exclude, = for exact names (as "
       "NCCL_SOCKET_IFNAME)"},
      {"GROVE_SOCKET_FAMILY", Type::kString, "", "force AF_INET or AF_INET6 for sockets",
       "AF_INET|AF_INET6|inet|inet6|ipv4|ipv6|4|6"},
      {"GROVE_TIMEOUT", Type::kDouble, "30",
       "seconds a wait may last without progress before the call fails with groveRemoteError "
       "(hang detection cannot be switched off: at most 10^6)",
       nullptr, 0.001, 1e6},
      // Transports
      {"GROVE_TRANSPORT", Type::kString, "auto",
       "auto (per peer, the first that reaches it: shm on one host, net where an RDMA fabric is "
       "present, socket otherwise), or the transports to use, comma-separated: shm, net, socket "
       "(tcp), loopback (threads of one process)"},
      {"GROVE_BUFFSIZE", Type::kSize, "1M", "bytes of each connection's buffer per direction",
       nullptr, 4096, 1024.0 * 1024 * 1024},
      {"GROVE_NCHANNELS", Type::kInt, "0",
       "channels (parallel connections) per collective; 0 = automatic", nullptr, 0, 32},
      {"GROVE_SHM_DIR", Type::kString, "/dev/shm", "where shared-memory segments are made"},
      // Algorithms
      {"GROVE_ALGO", Type::kString, "",
       "algorithm overrides, e.g. allreduce:ring;broadcast:direct or tree (grove-info --algos "
       "lists the algorithms; syntax in algorithms/select/selector.h)"},
      {"GROVE_CHUNKSIZE", Type::kSize, "0",
       "bytes a pipelined step moves at most; 0 = half the connection buffer", nullptr, 0,
       512.0 * 1024 * 1024},
      {"GROVE_TREE_JUDGE_BYTES", Type::kSize, "32M",
       "the message size at which the cost model chooses how many trees the tree plans keep "
       "(simulating each candidate, on first use), and a second set at twice it for larger "
       "calls; 0 = the packer's rule (99% of the optimum, fewest trees)",
       nullptr, 0, 1024.0 * 1024 * 1024},
      {"GROVE_PLAN_THREADS", Type::kInt, "0",
       "threads planning may use at once (the judge's simulations, the joint and split tree "
       "packings); 0 = the hardware's threads. The plans do not depend on it",
       nullptr, 0, 1024},
      {"GROVE_PLAN_CACHE_DIR", Type::kString, "",
       "a directory (this user's, writable by no one else) where finished plans are kept by the "
       "topology's fingerprint, for later communicators and processes; plans are always shared "
       "in memory within a process"},
      {"GROVE_DIRECT_MAX_BYTES", Type::kSize, "0",
       "messages up to this size use the latency (direct) algorithms; 0 = 16K over shm, 64K over "
       "sockets",
       nullptr, 0, 1024.0 * 1024 * 1024 * 1024},
      {"GROVE_EAGER", Type::kBool, "1",
       "over shared memory, collectives with small per-rank blocks run eagerly over one-message "
       "slot links instead of an algorithm's program (see GROVE_EAGER_MAX_BYTES); 0 = never"},
      {"GROVE_EAGER_MAX_BYTES", Type::kSize, "0",
       "largest per-rank block of an eager collective; 0 = min(8K, 16K / (nranks - 1))", nullptr, 0,
       1024.0 * 1024 * 1024},
      // Checking
      {"GROVE_CHECK", Type::kString, "tags",
       "how ranks check that they make the same calls (same value on every rank). tags: every "
       "call's first bytes on each link name the call (collective, count, type, op, root, bytes), "
       "so a receiver whose call differs fails with both calls named, and a receive shorter or "
       "longer than its send is an error; costs 32 bytes per link per call. calls: tags, and "
       "before every collective the ranks also compare their calls through the bootstrap, so "
       "every rank fails alike before any byte moves (one round trip per call, for debugging). "
       "none: no checks (CUDA communicators never tag)",
       "none|tags|calls"},
      // Topology
      {"GROVE_TOPO_FILE", Type::kString, "",
       "topology file (grove JSON or NCCL XML) that describes this machine, a cluster, or "
       "overrides part of the detected graph"},
      {"GROVE_TOPO_DUMP_FILE", Type::kString, "",
       "write the detected (and file-adjusted) topology of this rank's machine to this JSON file"},
      {"GROVE_TOPO_RANKS", Type::kString, "",
       "comma list of topology node names (gpu3 or host/gpu3), rank i on the i-th; overrides the "
       "automatic placement (same value on every rank)"},
      // Waiting
      {"GROVE_SPIN_US", Type::kInt, "20",
       "microseconds a wait spins before it yields the CPU, then sleeps", nullptr, 0, 1e6},
      // Launch
      {"GROVE_RANK", Type::kInt, "-1", "rank of this process (set by grove-launch)", nullptr, -1,
       16777216},
      {"GROVE_NRANKS", Type::kInt, "0", "number of ranks (set by grove-launch)", nullptr, 0,
       16777216},
      {"GROVE_LOCAL_RANK", Type::kInt, "-1",
       "rank among the ranks of this host (set by grove-launch)", nullptr, -1, 16777216},
      {"GROVE_DEVICE_KIND", Type::kString, "host", "default device kind: host or cuda",
       "host|cuda"},
      {"GROVE_DEVICE_EMULATION", Type::kBool, "0",
       "CUDA communicators run the device executor's interpreter on host threads over host "
       "memory instead of a GPU (buffers are host memory; for testing the device path without "
       "one)"},
      {"GROVE_DEVICE_ENGINE", Type::kString, "auto",
       "how CUDA communicators run collectives: kernel (one persistent kernel per launch), "
       "stream (stream operations: copies, short kernels and stream waits, no kernel ever waits "
       "for a peer), or auto (stream where processes share a GPU without MPS, else kernel)",
       "auto|kernel|stream"},
      {"GROVE_P2P_DISABLE", Type::kBool, "0",
       "CUDA communicators never map a peer GPU's memory (cuda_p2p): GPUs of one host talk through "
       "pinned shared host memory (host_staged), as NCCL_P2P_DISABLE"},
  };
  return vars;
}

// GROVE_* names the project's scripts, tools and build read (never the
// library): set in the environment they are not misspellings. A name that
// ends in '_' stands for every name it begins.
const std::vector<const char*>& toolVars() {
  static const std::vector<const char*> names = {
      "GROVE_BUILD_",            // scripts/build: GROVE_BUILD_DIR, GROVE_BUILD_JOBS, ...
      "GROVE_WITH_",             // scripts/build: optional parts
      "GROVE_GPU_CHECK_",        // scripts/gpu-check
      "GROVE_GPU_QUICK",         // scripts/gpu-check
      "GROVE_VENV",              // scripts/install-deps, scripts/test
      "GROVE_PYTHON",            // scripts
      "GROVE_TEST_JOBS",         // scripts/test
      "GROVE_TEST_TRACE",        // scripts/test
      "GROVE_SUITE_BACKEND",     // tests/torch
      "GROVE_QUICKSTART_RANKS",  // scripts/quickstart
      "GROVE_FUZZ_SECONDS",      // tests/fuzz
      "GROVE_FUZZERS",           // tests/fuzz
      "GROVE_FAULT_TRIALS",      // tests/multiproc fault suite
      "GROVE_FAULT_SEED",        // tests/multiproc fault suite
      "GROVE_SOAK_CALLS",        // tests/multiproc soak
      "GROVE_TSAN",              // tests/sanitize
      "GROVE_SANITIZE",          // tests/sanitize
      "GROVE_TORCH_",            // tests/torch and bindings/torch's build
      "GROVE_FABRIC_",           // tests/fabric
      "GROVE_NCCL_",             // tests/nccl: oracles
      "GROVE_CUDA_RUNTIME_INCLUDE",
      "GROVE_LIB",            // bindings: where libgrove.so is
      "GROVE_ROOT",           // scripts: the checkout
      "GROVE_PERF_BINARIES",  // perf
      "GROVE_TOPO_TOOL",      // tests/topology
  };
  return names;
}

}  // namespace grove::config
