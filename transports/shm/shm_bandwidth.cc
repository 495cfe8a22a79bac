// shm_bandwidth: streaming bandwidth and ping-pong latency of the shm transport
// between two forked processes, for a few ring sizes, so tuning has numbers.
//
// How it works: for each buffer size the program forks; the parent is rank 0
// (sender), the child rank 1 (receiver). Both build a ShmTransport over the
// same jobId and establish one link each way. The sender copies from a source
// buffer (--mem) into reserve()d ring space and commits; the receiver peeks,
// copies into a destination of the same size (or only touches the bytes with --nocopy) and
// consumes. The receiver times from the first byte to the last and reports
// through a pipe. Waits go through grove::Waiter like the executors'. Then an
// 8-byte ping-pong over the two links gives the one-way latency.
//
// Usage: shm_bandwidth [--bytes 1G] [--sizes 64K,256K,1M,4M] [--chunk 0] [--mem 4M]
//                      [--nocopy] [--iters 20000]
// --chunk caps each copy (the executors copy in pipeline chunks); --mem sets the
// size of the source and destination buffers (beyond the L3 size the stream is
// DRAM-bound); --nocopy only measures the ring's hand-off overhead.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/wait.h"
#include "transports/shm/shm_transport.h"

namespace {

using grove::transport::Context;
using grove::transport::LinkKey;
using grove::transport::RecvHalf;
using grove::transport::SendHalf;
using grove::transport::ShmTransport;
using Clock = std::chrono::steady_clock;

struct Options {
  uint64_t bytes = 1ull << 30;
  std::vector<size_t> sizes = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
  size_t chunk = 0;      // 0: whatever reserve() gives
  size_t mem = 4 << 20;  // bytes of the source and of the destination buffer
  bool copy = true;
  int iters = 20000;
};

/// What the receiver reports back.
struct Result {
  double seconds = 0;
  double latencyUs = 0;
  uint64_t checksum = 0;
  int ok = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw grove::Error(groveInvalidArgument, a + " needs a value");
      return argv[++i];
    };
    if (a == "--bytes")
      o.bytes = grove::config::parseSize(next());
    else if (a == "--mem")
      o.mem = grove::config::parseSize(next());
    else if (a == "--chunk")
      o.chunk = grove::config::parseSize(next());
    else if (a == "--iters")
      o.iters = std::stoi(next());
    else if (a == "--nocopy")
      o.copy = false;
    else if (a == "--sizes") {
      o.sizes.clear();
      std::string s = next();
      for (size_t pos = 0; pos <= s.size();) {
        size_t comma = s.find(',', pos);
        if (comma == std::string::npos) comma = s.size();
        o.sizes.push_back(grove::config::parseSize(s.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else {
      printf(
          "usage: shm_bandwidth [--bytes 1G] [--sizes 64K,256K,1M,4M] [--chunk N] [--mem 4M] "
          "[--nocopy] [--iters N]\n");
      exit(a == "-h" || a == "--help" ? 0 : 2);
    }
  }
  return o;
}

/// Streams o.bytes from the source buffer into the ring.
void sendStream(SendHalf& s, const Options& o, const std::vector<uint8_t>& src,
                const grove::WaitContext& wc) {
  grove::Waiter w(wc, "sending");
  uint64_t done = 0;
  while (done < o.bytes) {
    void* p;
    size_t n = s.reserve(&p);
    if (n == 0) {
      w.wait();
      continue;
    }
    w.progressed();
    size_t off = done % src.size();
    n = std::min<uint64_t>({n, o.bytes - done, src.size() - off});
    if (o.chunk != 0) n = std::min(n, o.chunk);
    if (o.copy) memcpy(p, src.data() + off, n);
    s.commit(n);
    done += n;
  }
}

/// Receives o.bytes; returns seconds from the first byte to the last.
double recvStream(RecvHalf& r, const Options& o, std::vector<uint8_t>& dst, uint64_t* sum,
                  const grove::WaitContext& wc) {
  grove::Waiter w(wc, "receiving");
  uint64_t done = 0;
  Clock::time_point start;
  while (done < o.bytes) {
    const void* p;
    size_t n = r.peek(&p);
    if (n == 0) {
      w.wait();
      continue;
    }
    if (done == 0) start = Clock::now();
    w.progressed();
    size_t off = done % dst.size();
    n = std::min<uint64_t>({n, o.bytes - done, dst.size() - off});
    if (o.chunk != 0) n = std::min(n, o.chunk);
    auto* b = static_cast<const uint8_t*>(p);
    if (o.copy)
      memcpy(dst.data() + off, b, n);
    else
      *sum += b[0] + b[n - 1];
    r.consume(n);
    done += n;
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Ping-pong of 8-byte messages; rank 0 starts. Returns one-way latency in us.
double pingPong(SendHalf& s, RecvHalf& r, int rank, int iters, const grove::WaitContext& wc) {
  grove::Waiter w(wc, "ping-pong");
  auto sendOne = [&](uint64_t v) {
    void* p;
    while (s.reserve(&p) < sizeof(v)) w.wait();
    memcpy(p, &v, sizeof(v));
    s.commit(sizeof(v));
  };
  auto recvOne = [&] {
    const void* p;
    while (r.peek(&p) < sizeof(uint64_t)) w.wait();
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    r.consume(sizeof(v));
    w.progressed();
    return v;
  };
  auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      sendOne(i);
      recvOne();
    } else {
      sendOne(recvOne());
    }
  }
  double sec = std::chrono::duration<double>(Clock::now() - start).count();
  return sec / iters / 2 * 1e6;
}

/// One side of one run; the receiver (rank 1) writes its Result to `fd`.
void runSide(int rank, const std::vector<int>& pids, size_t buf, const Options& o, int fd) {
  grove::AbortSignal abort;
  Context c;
  c.rank = rank;
  c.nranks = 2;
  c.jobId = "bw" + std::to_string(pids[0]) + "_" + std::to_string(buf);
  c.bufferBytes = buf;
  c.wait = grove::WaitContext::of(abort, 30.0);
  c.peers.resize(2);
  for (int i = 0; i < 2; ++i) {
    c.peers[i].rank = i;
    c.peers[i].pid = pids[i];
    c.peers[i].hostHash = 1;
  }
  ShmTransport t(c);
  std::vector<std::unique_ptr<SendHalf>> sends;
  std::vector<std::unique_ptr<RecvHalf>> recvs;
  t.establish({{1 - rank, 0}}, {{1 - rank, 0}}, sends, recvs);
  std::vector<uint8_t> mem(o.mem);
  for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<uint8_t>(i * 7);
  Result res;
  if (rank == 0) {
    sendStream(*sends[0], o, mem, c.wait);
  } else {
    res.seconds = recvStream(*recvs[0], o, mem, &res.checksum, c.wait);
  }
  res.latencyUs = pingPong(*sends[0], *recvs[0], rank, o.iters, c.wait);
  res.ok = 1;
  if (fd >= 0 && write(fd, &res, sizeof(res)) != sizeof(res)) perror("write");
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  printf("# shm_bandwidth: one-way stream of %llu bytes, %s, chunk %zu, mem %zu, %d ping-pongs\n",
         static_cast<unsigned long long>(o.bytes), o.copy ? "memcpy in and out" : "no copies",
         o.chunk, o.mem, o.iters);
  printf("# %10s %12s %10s %12s\n", "buffer", "seconds", "GB/s", "latency_us");
  int failures = 0;
  for (size_t buf : o.sizes) {
    int pipeFd[2];
    if (pipe(pipeFd) != 0) return 1;
    fflush(stdout);
    int parent = getpid();
    pid_t child = fork();
    if (child == 0) {
      close(pipeFd[0]);
      try {
        runSide(1, {parent, static_cast<int>(getpid())}, buf, o, pipeFd[1]);
      } catch (const std::exception& e) {
        fprintf(stderr, "receiver: %s\n", e.what());
        _exit(1);
      }
      _exit(0);
    }
    close(pipeFd[1]);
    try {
      runSide(0, {parent, child}, buf, o, -1);
    } catch (const std::exception& e) {
      fprintf(stderr, "sender: %s\n", e.what());
    }
    Result res;
    bool got = read(pipeFd[0], &res, sizeof(res)) == sizeof(res) && res.ok == 1;
    close(pipeFd[0]);
    int status = 0;
    waitpid(child, &status, 0);
    if (!got) {
      printf("  %10zu %12s\n", buf, "failed");
      ++failures;
      continue;
    }
    printf("  %10zu %12.4f %10.2f %12.2f\n", buf, res.seconds, o.bytes / res.seconds / 1e9,
           res.latencyUs);
  }
  return failures == 0 ? 0 : 1;
}
