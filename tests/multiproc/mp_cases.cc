// The cases of grove_mp_check: buffer set-up, the call, and the checks, one
// block per collective. See grove_mp_check.cc for the overview and
// mp_types.h for the input values.
//
// Buffer conventions (NCCL's in-place forms, as grove.h documents them):
//   allreduce, broadcast, reduce   in place: sendbuff == recvbuff
//   allgather                      in place: sendbuff == recvbuff + rank*count
//   reducescatter                  in place: recvbuff == sendbuff + rank*count
//   gather                         in place: sendbuff == recvbuff + rank*count (root: rank == root)
//   scatter                        in place: recvbuff == sendbuff + rank*count (root: rank == root)
// Buffers a rank does not use are passed as NULL out of place (broadcast and
// scatter send on non-roots, reduce and gather recv on non-roots). In place,
// only the documented result range is checked (e.g. block `rank` of an
// in-place reduce-scatter); guards are always checked.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "mp_check.h"
#include "mp_types.h"

namespace mp {
namespace {

constexpr size_t kPeriod = 4093;  // prime period of the inputs
constexpr size_t kGuard = 64;     // guard bytes on each side of a buffer
constexpr uint8_t kGuardByte = 0xA5;

// Rows of inputs: rows[r] holds rowLen elements of rank r; in(r, i) = rows[r][i % rowLen].
struct Inputs {
  int dt = 0, op = 0;
  size_t es = 1, rowLen = 1;
  std::vector<std::vector<uint8_t>> rows;
  std::vector<uint8_t> red;  // reduced row (reducing collectives)

  void build(int dtype, int redop, bool reducing, size_t extent, int n, uint64_t seed) {
    dt = dtype;
    op = redop;
    es = dtypeSize(dt);
    rowLen = std::max<size_t>(1, std::min(kPeriod, extent));
    Kind kind = kindOf(reducing, op);
    rows.resize(n);
    for (int r = 0; r < n; ++r) {
      rows[r].resize(rowLen * es);
      for (size_t j = 0; j < rowLen; ++j)
        makeInput(dt, kind, r, n, hash3(seed, static_cast<uint64_t>(r), j),
                  rows[r].data() + j * es);
    }
    if (!reducing) return;
    red.assign(rowLen * es, 0);
    std::vector<const uint8_t*> ins(n);
    for (size_t j = 0; j < rowLen; ++j) {
      for (int r = 0; r < n; ++r) ins[r] = rows[r].data() + j * es;
      referenceReduce(dt, op, ins.data(), n, red.data() + j * es);
    }
  }
  // Copies elements [start, start+cnt) of row r (r = -1: the reduced row) to dst.
  void fill(uint8_t* dst, int r, size_t start, size_t cnt) const {
    const uint8_t* src = r < 0 ? red.data() : rows[r].data();
    size_t j = start % rowLen;
    while (cnt > 0) {
      size_t take = std::min(cnt, rowLen - j);
      std::memcpy(dst, src + j * es, take * es);
      dst += take * es;
      cnt -= take;
      j = 0;
    }
  }
};

// One buffer of a case: where it lives and what it must hold afterwards.
struct Buf {
  uint8_t* base = nullptr;  // user pointer; null = pass NULL
  size_t bytes = 0;
  std::vector<uint8_t>* exp = nullptr;
  size_t lo = 0, hi = 0;  // byte range that must equal *exp
  const char* name = "";
  uint8_t* e() { return exp->data(); }
};

void setup(Buf& b, std::vector<uint8_t>& arena, std::vector<uint8_t>& exp, size_t bytes,
           const char* name) {
  b.base = arena.data() + kGuard;
  b.bytes = bytes;
  b.exp = &exp;
  b.lo = 0;
  b.hi = bytes;
  b.name = name;
  if (exp.size() < bytes) exp.resize(bytes);
  std::memset(arena.data(), kGuardByte, kGuard);
  std::memset(b.base + bytes, kGuardByte, kGuard);
}

// Writes the complement of the expected bytes over [lo, hi) of b.
void poison(Buf& b, size_t lo, size_t hi) {
  const uint8_t* e = b.exp->data();
  for (size_t i = lo; i < hi; ++i) b.base[i] = static_cast<uint8_t>(~e[i]);
}

struct CaseDesc {
  int coll, dt, op;
  size_t count;
  int root;
  bool inplace;
};

void reportFail(Job& j, const CaseDesc& c, const std::string& what) {
  ++j.failures;
  if (j.quiet || j.printed++ >= j.opt.maxPrint) return;
  char root[16] = "-";
  if (isRooted(c.coll)) snprintf(root, sizeof root, "%d", c.root);
  printf("FAIL rank %d: %s dtype=%s op=%s count=%zu root=%s inplace=%d nranks=%d: %s\n", j.rank,
         kCollNames[c.coll], dtypeName(c.dt), isReducing(c.coll) ? opName(c.op) : "-", c.count,
         root, c.inplace ? 1 : 0, j.n, what.c_str());
  fflush(stdout);
}

// Checks b's guards and its range [lo, hi) against the expected bytes.
void verify(Job& j, const CaseDesc& c, Buf& b, bool valueCompare) {
  if (b.base == nullptr) return;
  const uint8_t* g0 = b.base - kGuard;
  const uint8_t* g1 = b.base + b.bytes;
  for (size_t i = 0; i < kGuard; ++i) {
    if (g0[i] == kGuardByte && g1[i] == kGuardByte) continue;
    bool before = g0[i] != kGuardByte;
    long off =
        before ? static_cast<long>(i) - static_cast<long>(kGuard) : static_cast<long>(b.bytes + i);
    reportFail(j, c,
               std::string("guard bytes ") + (before ? "before " : "after ") + b.name +
                   " overwritten (byte offset " + std::to_string(off) + ")");
    return;
  }
  if (b.hi <= b.lo) return;
  const size_t es = dtypeSize(c.dt);
  const uint8_t* exp = b.e();
  if (std::memcmp(b.base + b.lo, exp + b.lo, b.hi - b.lo) == 0) return;
  size_t bad = 0, first = SIZE_MAX;
  for (size_t off = b.lo; off < b.hi; off += es) {
    if (std::memcmp(b.base + off, exp + off, es) == 0) continue;
    if (valueCompare && toDouble(c.dt, b.base + off) == toDouble(c.dt, exp + off)) continue;
    if (first == SIZE_MAX) first = off;
    ++bad;
  }
  if (bad == 0) return;  // only -0 against +0
  reportFail(j, c,
             std::string(b.name) + ": first bad index " + std::to_string(first / es) + " (" +
                 std::to_string(bad) + " bad of " + std::to_string((b.hi - b.lo) / es) + "): got " +
                 formatElem(c.dt, b.base + first) + " expected " + formatElem(c.dt, exp + first));
}

struct P2P {
  bool isSend;
  int peer;
  uint8_t* buf;
};

void runGroup(Job& j, const std::vector<P2P>& ops, size_t count, int dt) {
  auto t = static_cast<groveDataType_t>(dt);
  check(j, groveGroupStart(), "groveGroupStart");
  for (const P2P& p : ops) {
    if (p.isSend)
      check(j, groveSend(p.buf, count, t, p.peer, j.comm, j.hs), "groveSend");
    else
      check(j, groveRecv(p.buf, count, t, p.peer, j.comm, j.hs), "groveRecv");
  }
  check(j, groveGroupEnd(), "groveGroupEnd");
}

Inputs gIn;

// --inject-fault: corrupts what the library produced, as a buggy library
// would; returns false if this case has nothing to corrupt.
bool injectFault(const std::string& kind, const CaseDesc& c, Buf& S, Buf& R) {
  const size_t es = dtypeSize(c.dt);
  if (kind == "result") {
    Buf& b = (R.base && R.hi > R.lo) ? R : S;
    if (!b.base || b.hi <= b.lo) return false;
    b.base[b.lo + ((b.hi - b.lo) / es / 2) * es] ^= 0x01;
    return true;
  }
  if (kind == "guard") {
    Buf& b = R.base ? R : S;
    if (!b.base) return false;
    b.base[b.bytes + 3] ^= 0xff;
    return true;
  }
  if (kind == "send") {
    if (!S.base || S.bytes == 0 || std::string(S.name) != "sendbuff") return false;
    S.base[S.bytes - 1] ^= 0x10;
    return true;
  }
  return false;
}

void runCase(Job& j, const CaseDesc& c) {
  const int n = j.n, me = j.rank, root = c.root;
  const size_t es = dtypeSize(c.dt), cnt = c.count, blk = cnt * es;
  const auto dt = static_cast<groveDataType_t>(c.dt);
  const auto op = static_cast<groveRedOp_t>(c.op);
  uint64_t seed = hash3(j.opt.seed, static_cast<uint64_t>(c.coll * 1000 + c.dt * 10 + c.op),
                        cnt * 64 + static_cast<uint64_t>(root + 1) * 2 + (c.inplace ? 1 : 0));
  Inputs& in = gIn;
  in.build(c.dt, c.op, isReducing(c.coll), static_cast<size_t>(n) * cnt, n, seed);
  Buf S, R;
  // An out-of-place send buffer of k elements from [start, start+k) of rank r's row.
  auto sendInit = [&](int r, size_t start, size_t k) {
    setup(S, j.arenaS, j.expS, k * es, "sendbuff");
    in.fill(S.e(), r, start, k);
    std::memcpy(S.base, S.e(), k * es);
  };
  auto recvBuf = [&](size_t bytes) { setup(R, j.arenaR, j.expR, bytes, "recvbuff"); };
  auto inplaceBuf = [&](size_t bytes) { setup(S, j.arenaS, j.expS, bytes, "in-place buffer"); };
  groveResult_t res = groveSuccess;
  const char* fn = kCollNames[c.coll];

  switch (c.coll) {
    case kAllReduce:
      if (!c.inplace) {
        sendInit(me, 0, cnt);
        recvBuf(blk);
        in.fill(R.e(), -1, 0, cnt);
        poison(R, 0, blk);
        res = groveAllReduce(S.base, R.base, cnt, dt, op, j.comm, j.hs);
      } else {
        inplaceBuf(blk);
        in.fill(S.e(), -1, 0, cnt);
        in.fill(S.base, me, 0, cnt);
        res = groveAllReduce(S.base, S.base, cnt, dt, op, j.comm, j.hs);
      }
      break;
    case kReduce:
      if (!c.inplace) {
        sendInit(me, 0, cnt);
        if (me == root) {
          recvBuf(blk);
          in.fill(R.e(), -1, 0, cnt);
          poison(R, 0, blk);
        }
        res = groveReduce(S.base, R.base, cnt, dt, op, root, j.comm, j.hs);
      } else {
        inplaceBuf(blk);
        in.fill(S.base, me, 0, cnt);
        if (me == root)
          in.fill(S.e(), -1, 0, cnt);
        else
          S.hi = 0;  // a non-root's buffer is not specified afterwards
        res = groveReduce(S.base, S.base, cnt, dt, op, root, j.comm, j.hs);
      }
      break;
    case kReduceScatter:
      if (!c.inplace) {
        sendInit(me, 0, n * cnt);
        recvBuf(blk);
        in.fill(R.e(), -1, me * cnt, cnt);
        poison(R, 0, blk);
        res = groveReduceScatter(S.base, R.base, cnt, dt, op, j.comm, j.hs);
      } else {
        inplaceBuf(n * blk);
        in.fill(S.base, me, 0, n * cnt);
        in.fill(S.e() + me * blk, -1, me * cnt, cnt);
        S.lo = me * blk;
        S.hi = S.lo + blk;
        res = groveReduceScatter(S.base, S.base + me * blk, cnt, dt, op, j.comm, j.hs);
      }
      break;
    case kBroadcast:
      if (!c.inplace) {
        if (me == root) sendInit(root, 0, cnt);
        recvBuf(blk);
        in.fill(R.e(), root, 0, cnt);
        poison(R, 0, blk);
        res = groveBroadcast(S.base, R.base, cnt, dt, root, j.comm, j.hs);
      } else {
        inplaceBuf(blk);
        in.fill(S.e(), root, 0, cnt);
        if (me == root)
          std::memcpy(S.base, S.e(), blk);
        else
          poison(S, 0, blk);
        res = groveBroadcast(S.base, S.base, cnt, dt, root, j.comm, j.hs);
      }
      break;
    case kAllGather:
      if (!c.inplace) {
        sendInit(me, 0, cnt);
        recvBuf(n * blk);
        for (int s = 0; s < n; ++s) in.fill(R.e() + s * blk, s, 0, cnt);
        poison(R, 0, n * blk);
        res = groveAllGather(S.base, R.base, cnt, dt, j.comm, j.hs);
      } else {
        inplaceBuf(n * blk);
        for (int s = 0; s < n; ++s) in.fill(S.e() + s * blk, s, 0, cnt);
        poison(S, 0, n * blk);
        std::memcpy(S.base + me * blk, S.e() + me * blk, blk);
        res = groveAllGather(S.base + me * blk, S.base, cnt, dt, j.comm, j.hs);
      }
      break;
    case kGather:
      if (!c.inplace) {
        sendInit(me, 0, cnt);
        if (me == root) {
          recvBuf(n * blk);
          for (int s = 0; s < n; ++s) in.fill(R.e() + s * blk, s, 0, cnt);
          poison(R, 0, n * blk);
        }
        res = groveGather(S.base, R.base, cnt, dt, root, j.comm, j.hs);
      } else {
        inplaceBuf(n * blk);
        for (int s = 0; s < n; ++s) in.fill(S.e() + s * blk, s, 0, cnt);
        poison(S, 0, n * blk);
        std::memcpy(S.base + me * blk, S.e() + me * blk, blk);
        if (me != root) {  // only its own block (its sendbuff) is specified
          S.lo = me * blk;
          S.hi = S.lo + blk;
        }
        res = groveGather(S.base + me * blk, S.base, cnt, dt, root, j.comm, j.hs);
      }
      break;
    case kScatter:
      if (!c.inplace) {
        if (me == root) sendInit(root, 0, n * cnt);
        recvBuf(blk);
        in.fill(R.e(), root, me * cnt, cnt);
        poison(R, 0, blk);
        res = groveScatter(S.base, R.base, cnt, dt, root, j.comm, j.hs);
      } else {
        inplaceBuf(n * blk);
        if (me == root) {
          in.fill(S.e(), root, 0, n * cnt);
          std::memcpy(S.base, S.e(), n * blk);
        } else {
          in.fill(S.e() + me * blk, root, me * cnt, cnt);
          poison(S, 0, n * blk);
          S.lo = me * blk;
          S.hi = S.lo + blk;
        }
        res = groveScatter(S.base, S.base + me * blk, cnt, dt, root, j.comm, j.hs);
      }
      break;
    case kAlltoAll:
      sendInit(me, 0, n * cnt);
      recvBuf(n * blk);
      for (int s = 0; s < n; ++s) in.fill(R.e() + s * blk, s, me * cnt, cnt);
      poison(R, 0, n * blk);
      res = groveAlltoAll(S.base, R.base, cnt, dt, j.comm, j.hs);
      break;
    case kRing:
    case kPair: {
      int to = c.coll == kRing ? (me + 1) % n : ((me ^ 1) < n ? (me ^ 1) : me);
      int from = c.coll == kRing ? (me + n - 1) % n : to;
      sendInit(me, 0, cnt);
      recvBuf(blk);
      in.fill(R.e(), from, 0, cnt);
      poison(R, 0, blk);
      runGroup(j, {{true, to, S.base}, {false, from, R.base}}, cnt, c.dt);
      break;
    }
    case kAllPairs: {
      sendInit(me, 0, n * cnt);
      recvBuf(n * blk);
      for (int s = 0; s < n; ++s) in.fill(R.e() + s * blk, s, me * cnt, cnt);
      poison(R, 0, n * blk);
      std::vector<P2P> ops;
      for (int p = 0; p < n; ++p) {
        ops.push_back({true, p, S.base + p * blk});
        ops.push_back({false, p, R.base + p * blk});
      }
      runGroup(j, ops, cnt, c.dt);
      break;
    }
  }
  check(j, res, fn);
  if (j.hs) check(j, groveHostStreamSynchronize(j.hs), "groveHostStreamSynchronize");
  const bool valueCompare = isReducing(c.coll) && isFloat(c.dt);
  const bool injected = !j.opt.injectFault.empty() && injectFault(j.opt.injectFault, c, S, R);
  const long before = j.failures;
  j.quiet = injected;
  verify(j, c, S, valueCompare);
  verify(j, c, R, valueCompare);
  j.quiet = false;
  if (injected) {
    // The injected fault must be caught; it does not count as a failure.
    bool caught = j.failures > before;
    j.failures = before;
    ++j.injected;
    if (!caught)
      reportFail(j, c, "the checker missed an injected '" + j.opt.injectFault + "' fault");
  }
}

bool selected(const Options& o, int coll) {
  if (o.filter.empty()) return true;
  std::string name = kCollNames[coll];
  return o.filter.count(name) || (name.rfind("sendrecv", 0) == 0 && o.filter.count("sendrecv"));
}

}  // namespace

void runCases(Job& j) {
  const Options& o = j.opt;
  const int n = j.n;
  size_t maxBytes = static_cast<size_t>(n) * ((size_t{1} << 20) + 64) + 2 * kGuard;
  j.arenaS.assign(maxBytes, 0);
  j.arenaR.assign(maxBytes, 0);
  long combo = 0, largeCombo = 0, largeRootTurn = 0;
  for (int coll = 0; coll < kNumColl; ++coll) {
    if (!selected(o, coll)) continue;
    double t0 = nowSec();
    long before = j.cases;
    for (int size : o.sizes) {
      const bool large = size == kLarge;
      const std::vector<int>& dts = large ? o.largeDtypes : o.dtypes;
      std::vector<int> ops = isReducing(coll) ? (large ? o.largeOps : o.ops) : std::vector<int>{0};
      for (int dt : dts) {
        for (int op : ops) {
          long idx = combo++;
          if (idx % o.partM != o.partK) continue;
          if (large && (largeCombo++ % o.largePartM != o.largePartK)) continue;
          size_t count = large ? (size_t{1} << 20) / dtypeSize(dt) + 3 : static_cast<size_t>(size);
          for (int ip = 0; ip < (hasInPlace(coll) ? 2 : 1); ++ip) {
            std::vector<int> roots = {0};
            if (isRooted(coll)) {
              if (large)
                roots = {(largeRootTurn++ % 2) ? n - 1 : 0};
              else if (o.roots == "ends")
                roots = n > 1 ? std::vector<int>{0, n - 1} : roots;
              else {
                roots.clear();
                for (int r = 0; r < n; ++r) roots.push_back(r);
              }
            }
            for (int root : roots) {
              CaseDesc c{coll, dt, op, count, root, ip == 1};
              if (o.verbose && j.rank == 0)
                fprintf(stderr, "case %s %s %s count=%zu root=%d inplace=%d\n", kCollNames[coll],
                        dtypeName(dt), opName(op), count, root, ip);
              ++j.cases;
              runCase(j, c);
            }
          }
        }
      }
    }
    j.collTime[coll] += nowSec() - t0;
    j.collCases[coll] += j.cases - before;
  }
}

}  // namespace mp
