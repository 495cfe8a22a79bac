// Building stream tapes (see stream_tape.h).
#include "exec/device/stream_tape.h"

#include <algorithm>
#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "exec/device/dev_lane.h"
#include "ir/step_traits.h"
#include "ir/wire.h"

namespace grove::exec::dev {

uint32_t LaunchTape::maxLanes() const {
  size_t m = 0;
  for (const auto& p : phases) m = std::max(m, p.size());
  return static_cast<uint32_t>(m);
}

size_t LaunchTape::ops() const {
  size_t n = 0;
  for (const auto& p : phases)
    for (const TapeLane& l : p) n += l.ops.size();
  return n;
}

struct TapeBuilder::Lane {
  TapeLane* out;
  uint32_t step;
  void push(TapeOp op) {
    op.step = step;
    out->ops.push_back(op);
  }
};

namespace {

bool reached(uint64_t have, uint64_t want) { return static_cast<int64_t>(have - want) >= 0; }

TapeOp copyOp(void* dst, const void* src, uint64_t bytes) {
  TapeOp op;
  op.kind = TapeOpKind::kCopy;
  op.dst = dst;
  op.src[0] = src;
  op.bytes = bytes;
  return op;
}

TapeOp reduceOp(const DevReduce& r, void* dst, void* dst2, const void* const* srcs, int nsrc,
                uint64_t count, bool final) {
  TapeOp op;
  op.kind = TapeOpKind::kReduce;
  op.dst = dst;
  op.dst2 = dst2;
  op.nsrc = static_cast<uint8_t>(nsrc);
  for (int k = 0; k < nsrc; ++k) op.src[k] = srcs[k];
  op.bytes = count;
  op.final = final ? 1 : 0;
  op.reduce = r;
  return op;
}

TapeOp postOp(uint64_t* word, uint64_t value) {
  TapeOp op;
  op.kind = TapeOpKind::kPost;
  op.word = word;
  op.value = value;
  return op;
}

}  // namespace

TapeBuilder::TapeBuilder(uint64_t pieceBytes) : pieceBytes_(pieceBytes) {
  if (pieceBytes_ < plan::kWireAlign) pieceBytes_ = plan::kWireAlign;
}

std::vector<std::pair<uint64_t*, uint64_t>> TapeBuilder::awaitedValues() const {
  std::vector<std::pair<uint64_t*, uint64_t>> words;
  words.reserve(known_.size());
  for (const auto& [w, v] : known_) words.push_back({const_cast<uint64_t*>(w), v});
  return words;
}

void TapeBuilder::build(const DevCall* calls, size_t n, LaunchTape& out) {
  // Check everything first: a refused step leaves the counters untouched.
  for (size_t c = 0; c < n; ++c) {
    const DevCall& call = calls[c];
    if (!dtypeValid(call.reduce.dtype))
      throwInvalidArgument("stream tape: call " + std::to_string(c) + " has an invalid data type");
    if (!opValid(call.reduce.op))
      throwInvalidArgument("stream tape: call " + std::to_string(c) +
                           " has an invalid reduction op");
    const uint32_t esz = devDtypeSize(call.reduce.dtype);
    const DevProgramView& prog = call.program;
    for (uint32_t p = 0; p < prog.nPhases; ++p)
      for (uint32_t l = prog.phases[p].begin; l < prog.phases[p].end; ++l)
        for (uint32_t i = prog.lanes[l].begin; i < prog.lanes[l].end; ++i) {
          const DevStep& s = prog.steps[i];
          const uint8_t* src = nullptr;
          uint8_t* dst = nullptr;
          lane_detail::StepRings rs;
          const std::string where = "stream tape: call " + std::to_string(c) + " phase " +
                                    std::to_string(p) + " lane " +
                                    std::to_string(l - prog.phases[p].begin) + " step " +
                                    std::to_string(i - prog.lanes[l].begin);
          if (s.bytes != 0 && !lane_detail::resolveStep(call, s, esz, &src, &dst, &rs))
            throwInternalError(where + " cannot run");
          // A reduce runs as a kernel that loads whole elements.
          if (s.bytes != 0 && plan::stepReduces(static_cast<plan::StepKind>(s.kind)) &&
              ((src != nullptr && reinterpret_cast<uintptr_t>(src) % esz != 0) ||
               (dst != nullptr && reinterpret_cast<uintptr_t>(dst) % esz != 0)))
            throwInvalidArgument(where + ": a reduced buffer is not aligned to its " +
                                 std::to_string(esz) + "-byte elements");
        }
  }
  size_t np = 0;
  for (size_t c = 0; c < n; ++c) {
    const DevProgramView& prog = calls[c].program;
    for (uint32_t p = 0; p < prog.nPhases; ++p, ++np) {
      if (out.phases.size() <= np) out.phases.emplace_back();
      std::vector<TapeLane>& lanes = out.phases[np];
      const DevPhase& ph = prog.phases[p];
      lanes.resize(ph.end - ph.begin);
      for (uint32_t l = 0; l < ph.end - ph.begin; ++l) {
        TapeLane& tl = lanes[l];
        tl.ops.clear();
        tl.call = static_cast<uint32_t>(c);
        tl.phase = p;
        tl.lane = l;
        const DevLane& ln = prog.lanes[ph.begin + l];
        Lane lane{&tl, 0};
        for (uint32_t i = ln.begin; i < ln.end; ++i) {
          lane.step = i - ln.begin;
          buildStep(lane, calls[c], prog.steps[i]);
        }
      }
    }
  }
  out.phases.resize(np);
}

void TapeBuilder::buildStep(Lane& lane, const DevCall& call, const DevStep& s) {
  if (s.bytes == 0) return;
  const uint32_t esz = devDtypeSize(call.reduce.dtype);
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  lane_detail::StepRings rs;
  lane_detail::resolveStep(call, s, esz, &src, &dst, &rs);  // checked in build()
  if (rs.nSend == 0 && rs.nRecv == 0)
    buildLocal(lane, call, s, src, dst, esz);
  else
    buildRingStep(lane, call, s, rs, src, dst, esz);
}

// As runLocal (dev_lane.h): a reduce in place, a copy, or an overlapping copy
// in pieces no longer than the distance, in the direction that never reads
// a byte already overwritten (the lane's operations run in order).
void TapeBuilder::buildLocal(Lane& lane, const DevCall& call, const DevStep& s, const uint8_t* src,
                             uint8_t* dst, uint32_t esz) {
  const uint64_t bytes = s.bytes;
  if (static_cast<plan::StepKind>(s.kind) == plan::StepKind::kReduce) {
    const void* srcs[2] = {dst, src};
    lane.push(reduceOp(call.reduce, dst, nullptr, srcs, 2, bytes / esz, s.final != 0));
    return;
  }
  if (dst == src) return;
  if (!(src < dst + bytes && dst < src + bytes)) {
    lane.push(copyOp(dst, src, bytes));
  } else if (dst < src) {
    const uint64_t dist = static_cast<uint64_t>(src - dst);
    for (uint64_t off = 0; off < bytes; off += dist)
      lane.push(copyOp(dst + off, src + off, std::min(dist, bytes - off)));
  } else {
    const uint64_t dist = static_cast<uint64_t>(dst - src);
    for (uint64_t end = bytes; end > 0;) {
      const uint64_t piece = std::min(dist, end);
      end -= piece;
      lane.push(copyOp(dst + end, src + end, piece));
    }
  }
}

void TapeBuilder::buildRingStep(Lane& lane, const DevCall& call, const DevStep& s,
                                const lane_detail::StepRings& rs, const uint8_t* src, uint8_t* dst,
                                uint32_t esz) {
  // Waits are emitted only when not already known to have passed.
  auto wait = [&](uint64_t* word, const uint32_t* closed, uint64_t value) {
    uint64_t& k = known_[word];
    if (reached(k, value)) return;
    TapeOp op;
    op.kind = TapeOpKind::kWait;
    op.word = word;
    op.closed = closed;
    op.value = value;
    lane.push(op);
    k = value;
  };
  // Room for `n` more bytes at head h of a send ring; data for n at tail t of a receive ring.
  auto waitRoom = [&](const DevRing& r, uint64_t h, uint64_t n) {
    if (h + n > r.capacity) wait(r.tail, r.closed, h + n - r.capacity);
  };
  auto waitData = [&](const DevRing& r, uint64_t t, uint64_t n) { wait(r.head, r.closed, t + n); };

  uint64_t* head[kMaxStepLinks];
  uint64_t* tail[kMaxStepLinks];
  for (uint32_t k = 0; k < rs.nSend; ++k) head[k] = &own_[rs.send[k]->head];
  for (uint32_t k = 0; k < rs.nRecv; ++k) tail[k] = &own_[rs.recv[k]->tail];

  // The wire rule: every stream of the step to a 16-byte boundary.
  for (uint32_t k = 0; k < rs.nSend; ++k) {
    const DevRing& r = *rs.send[k];
    uint64_t& h = *head[k];
    const uint64_t pad = plan::wirePad(h);
    if (pad == 0) continue;
    waitRoom(r, h, pad);
    TapeOp zero;
    zero.kind = TapeOpKind::kZero;
    zero.dst = r.data + h % r.capacity;  // never wraps: capacity % 64 == 0
    zero.bytes = pad;
    lane.push(zero);
    h += pad;
    lane.push(postOp(r.head, h));
  }
  for (uint32_t k = 0; k < rs.nRecv; ++k) {
    const DevRing& r = *rs.recv[k];
    uint64_t& t = *tail[k];
    const uint64_t pad = plan::wirePad(t);
    if (pad == 0) continue;
    waitData(r, t, pad);
    t += pad;
    lane.push(postOp(r.tail, t));
  }

  const uint32_t gran = s.bytes % esz == 0 ? esz : 1;
  const int nsrc = 1 + static_cast<int>(rs.nRecv);
  const auto kind = static_cast<plan::StepKind>(s.kind);
  for (uint64_t done = 0; done < s.bytes;) {
    uint64_t n = std::min(s.bytes - done, pieceBytes_);
    for (uint32_t k = 0; k < rs.nSend; ++k) {
      const DevRing& r = *rs.send[k];
      n = std::min({n, r.capacity / 2, r.capacity - *head[k] % r.capacity});
    }
    for (uint32_t k = 0; k < rs.nRecv; ++k) {
      const DevRing& r = *rs.recv[k];
      n = std::min({n, r.capacity / 2, r.capacity - *tail[k] % r.capacity});
    }
    n -= n % gran;
    if (n == 0) throwInternalError("stream tape: a ring too small for one element of the step");
    for (uint32_t k = 0; k < rs.nRecv; ++k) waitData(*rs.recv[k], *tail[k], n);
    for (uint32_t k = 0; k < rs.nSend; ++k) waitRoom(*rs.send[k], *head[k], n);

    uint8_t* out[kMaxStepLinks];
    const void* in[1 + kMaxStepLinks];
    for (uint32_t k = 0; k < rs.nSend; ++k)
      out[k] = rs.send[k]->data + *head[k] % rs.send[k]->capacity;
    in[0] = src == nullptr ? nullptr : src + done;
    for (uint32_t k = 0; k < rs.nRecv; ++k)
      in[1 + k] = rs.recv[k]->data + *tail[k] % rs.recv[k]->capacity;
    uint8_t* d = dst == nullptr ? nullptr : dst + done;
    const uint64_t count = n / esz;
    const bool final = s.final != 0;
    switch (kind) {
      case plan::StepKind::kSend:
        for (uint32_t k = 0; k < rs.nSend; ++k) lane.push(copyOp(out[k], in[0], n));
        break;
      case plan::StepKind::kRecv: lane.push(copyOp(d, in[1], n)); break;
      case plan::StepKind::kRecvCopySend:
        lane.push(copyOp(d, in[1], n));
        for (uint32_t k = 0; k < rs.nSend; ++k) lane.push(copyOp(out[k], in[1], n));
        break;
      case plan::StepKind::kRecvReduce:
        lane.push(reduceOp(call.reduce, d, nullptr, in, nsrc, count, final));
        break;
      case plan::StepKind::kRecvReduceSend:
        for (uint32_t k = 0; k < rs.nSend; k += 2)
          lane.push(reduceOp(call.reduce, out[k], k + 1 < rs.nSend ? out[k + 1] : nullptr, in, nsrc,
                             count, final));
        break;
      case plan::StepKind::kRecvReduceCopySend:
        lane.push(reduceOp(call.reduce, d, out[0], in, nsrc, count, final));
        for (uint32_t k = 1; k < rs.nSend; ++k) lane.push(copyOp(out[k], d, n));
        break;
      default: break;  // local kinds never get here
    }
    for (uint32_t k = 0; k < rs.nSend; ++k) {
      *head[k] += n;
      lane.push(postOp(rs.send[k]->head, *head[k]));
    }
    for (uint32_t k = 0; k < rs.nRecv; ++k) {
      *tail[k] += n;
      lane.push(postOp(rs.recv[k]->tail, *tail[k]));
    }
    done += n;
  }
}

}  // namespace grove::exec::dev
