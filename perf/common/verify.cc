#include "perf/common/verify.h"

#include <algorithm>
#include <cstring>

#include "base/dtype.h"

namespace grove::perf {
namespace {

constexpr int64_t kExactLimit = 120;  // |partial results| stay <= this (int8, half, bf16 exact)
constexpr int kMaxTwos = 24;          // ranks that may contribute a 2 to a product (<= 6 per index)

bool isSigned(groveDataType_t t) {
  return t == groveInt8 || t == groveInt32 || t == groveInt64 || dtypeIsFloat(t);
}

int64_t sumModulus(int nranks) {
  return std::clamp<int64_t>(kExactLimit / std::max(nranks, 1) + 1, 1, 8);
}

int64_t avgBaseRange(int nranks) {
  return std::clamp<int64_t>(kExactLimit / std::max(nranks, 1) - 1, 1, 8);
}

// d(rank) of the avg pattern: +1, -1 in pairs, 0 for the odd one out.
int64_t avgDelta(int rank, int nranks) {
  if (rank % 2 == 1) return -1;
  return rank + 1 < nranks ? 1 : 0;
}

int64_t reduceInput(const DataSpec& s, int rank, size_t index) {
  const uint64_t i = index;
  const uint64_t r = static_cast<uint64_t>(rank);
  switch (s.op) {
    case groveSum: return static_cast<int64_t>((i * 5 + r * 3) % sumModulus(s.nranks));
    case groveAvg:
      return 1 + static_cast<int64_t>(i % avgBaseRange(s.nranks)) + avgDelta(rank, s.nranks);
    case groveProd:
      if (rank < kMaxTwos && (i + 2 * r) % 8 == 0) return 2;
      if (isSigned(s.type) && (i + r) % 3 == 1) return -1;
      return 1;
    case groveMax:
    case groveMin:
    default: {
      int64_t v = static_cast<int64_t>((r * 7 + i * 13) % 61);
      return isSigned(s.type) ? v - 30 : v;
    }
  }
}

}  // namespace

int64_t inputValue(const DataSpec& spec, int rank, size_t index) {
  if (collHasOp(spec.kind)) return reduceInput(spec, rank, index);
  int64_t v = static_cast<int64_t>((static_cast<uint64_t>(rank) * 31 + index * 7) % 97);
  return isSigned(spec.type) ? v - 48 : v;
}

int64_t reducedValue(const DataSpec& spec, size_t index) {
  uint64_t acc = static_cast<uint64_t>(inputValue(spec, 0, index));
  for (int r = 1; r < spec.nranks; ++r) {
    const int64_t v = inputValue(spec, r, index);
    switch (spec.op) {
      case groveSum:
      case groveAvg: acc += static_cast<uint64_t>(v); break;
      case groveProd: acc *= static_cast<uint64_t>(v); break;  // wraps, as integer types do
      case groveMax: acc = static_cast<uint64_t>(std::max(static_cast<int64_t>(acc), v)); break;
      case groveMin: acc = static_cast<uint64_t>(std::min(static_cast<int64_t>(acc), v)); break;
      default: break;
    }
  }
  int64_t result = static_cast<int64_t>(acc);
  if (spec.op == groveAvg) result /= std::max(spec.nranks, 1);
  return result;
}

namespace {
// An integer exact in `type` as element `index` of buf.
void putValue(groveDataType_t type, void* buf, size_t index, int64_t v) {
  storeElement(type, static_cast<double>(v), buf, index);
}
}  // namespace

size_t checkedRegionOffset(const DataSpec& spec, int rank, const CollCounts& counts, bool inPlace) {
  return inPlace ? counts.recvInplaceOffset * static_cast<size_t>(rank) * dtypeSize(spec.type) : 0;
}

size_t preparedRecvBytes(const DataSpec& spec, int rank, const CollCounts& c, bool inPlace) {
  const size_t es = dtypeSize(spec.type);
  const size_t regionEnd = checkedRegionOffset(spec, rank, c, inPlace) + c.recvCount * es;
  if (!inPlace) return regionEnd;
  const size_t inputEnd = (c.sendInplaceOffset * static_cast<size_t>(rank) + c.sendCount) * es;
  return std::max(regionEnd, inputEnd);
}

void prepareData(const DataSpec& spec, int rank, const CollCounts& c, bool inPlace, void* send,
                 void* recv, void* expected) {
  const size_t es = dtypeSize(spec.type);
  const size_t region = checkedRegionOffset(spec, rank, c, inPlace);
  char* recvBytes = static_cast<char*>(recv);
  std::memset(recv, 0, preparedRecvBytes(spec, rank, c, inPlace));
  char* data = inPlace ? recvBytes + c.sendInplaceOffset * static_cast<size_t>(rank) * es
                       : static_cast<char*>(send);
  const bool rootOnlyInput = spec.kind == CollKind::kBroadcast || spec.kind == CollKind::kScatter;
  if (!rootOnlyInput || rank == spec.root)
    for (size_t i = 0; i < c.sendCount; ++i)
      putValue(spec.type, data, i, inputValue(spec, rank, i));

  // Start from what the region holds now: rooted collectives leave it alone off the root.
  std::memcpy(expected, recvBytes + region, c.recvCount * es);
  const int n = spec.nranks;
  const size_t per = c.paramCount;
  switch (spec.kind) {
    case CollKind::kAllReduce:
      for (size_t i = 0; i < c.recvCount; ++i)
        putValue(spec.type, expected, i, reducedValue(spec, i));
      break;
    case CollKind::kReduce:
      if (rank != spec.root) break;
      for (size_t i = 0; i < c.recvCount; ++i)
        putValue(spec.type, expected, i, reducedValue(spec, i));
      break;
    case CollKind::kReduceScatter:
      for (size_t i = 0; i < c.recvCount; ++i)
        putValue(spec.type, expected, i, reducedValue(spec, static_cast<size_t>(rank) * per + i));
      break;
    case CollKind::kBroadcast:
      for (size_t i = 0; i < c.recvCount; ++i)
        putValue(spec.type, expected, i, inputValue(spec, spec.root, i));
      break;
    case CollKind::kGather:
      if (rank != spec.root) break;
      [[fallthrough]];
    case CollKind::kAllGather:
      for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < per; ++i)
          putValue(spec.type, expected, static_cast<size_t>(j) * per + i, inputValue(spec, j, i));
      break;
    case CollKind::kScatter:
      for (size_t i = 0; i < c.recvCount; ++i)
        putValue(spec.type, expected, i,
                 inputValue(spec, spec.root, static_cast<size_t>(rank) * per + i));
      break;
    case CollKind::kAlltoAll:
      for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < per; ++i)
          putValue(spec.type, expected, static_cast<size_t>(j) * per + i,
                   inputValue(spec, j, static_cast<size_t>(rank) * per + i));
      break;
    case CollKind::kSendRecv:
      for (size_t i = 0; i < c.recvCount; ++i)
        putValue(spec.type, expected, i, inputValue(spec, (rank - 1 + n) % n, i));
      break;
  }
}

size_t countWrong(groveDataType_t type, const void* got, const void* expected, size_t count) {
  const size_t es = dtypeSize(type);
  const char* a = static_cast<const char*>(got);
  const char* b = static_cast<const char*>(expected);
  if (std::memcmp(a, b, count * es) == 0) return 0;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += std::memcmp(a + i * es, b + i * es, es) != 0;
  return wrong;
}

}  // namespace grove::perf
