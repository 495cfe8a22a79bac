#include "core/call_check.h"

#include <cstring>
#include <string>

#include "base/dtype.h"
#include "base/error.h"

namespace grove::core {
namespace {

// What a collective call is, as every rank records it.
struct CollRecord {
  uint64_t seq = 0;
  uint64_t count = 0;
  int32_t kind = -1;  // plan::Coll
  int32_t dtype = 0;
  int32_t op = 0;
  int32_t root = 0;
};

bool usesOp(plan::Coll c) {
  return c == plan::Coll::kAllReduce || c == plan::Coll::kReduce || c == plan::Coll::kReduceScatter;
}

bool usesRoot(plan::Coll c) {
  return c == plan::Coll::kBroadcast || c == plan::Coll::kReduce || c == plan::Coll::kGather ||
         c == plan::Coll::kScatter;
}

std::string describe(const CollRecord& r) {
  if (r.kind < 0 || r.kind > static_cast<int32_t>(plan::Coll::kSendRecv)) return "an unknown call";
  auto c = static_cast<plan::Coll>(r.kind);
  std::string text = std::string(plan::collName(c)) + "(count " + std::to_string(r.count) + ", " +
                     dtypeName(static_cast<groveDataType_t>(r.dtype));
  if (usesOp(c)) text += std::string(", ") + opName(static_cast<groveRedOp_t>(r.op));
  if (usesRoot(c)) text += ", root " + std::to_string(r.root);
  return text + ")";
}

// The fields that must agree for this kind of call.
bool sameCall(const CollRecord& a, const CollRecord& b) {
  if (a.seq != b.seq || a.kind != b.kind) return false;
  auto c = static_cast<plan::Coll>(a.kind);
  return a.count == b.count && a.dtype == b.dtype && (!usesOp(c) || a.op == b.op) &&
         (!usesRoot(c) || a.root == b.root);
}

std::vector<CollRecord> gatherRecords(const CollRecord& mine, int nranks,
                                      const AllGatherFn& allGather) {
  std::vector<uint8_t> all = allGather(&mine, sizeof(mine));
  if (all.size() != sizeof(CollRecord) * static_cast<size_t>(nranks))
    throwInternalError("GROVE_CHECK: the call exchange returned " + std::to_string(all.size()) +
                       " bytes");
  std::vector<CollRecord> out(static_cast<size_t>(nranks));
  std::memcpy(out.data(), all.data(), all.size());
  return out;
}

// Throws when a rank's record differs from rank 0's: another call in the same slot.
void compareRecords(const std::vector<CollRecord>& all) {
  for (size_t r = 1; r < all.size(); ++r) {
    if (sameCall(all[0], all[r])) continue;
    std::string slot = "collective #" + std::to_string(all[0].seq);
    if (all[0].seq != all[r].seq)
      slot = "collectives #" + std::to_string(all[0].seq) + " and #" + std::to_string(all[r].seq);
    throwInvalidUsage("GROVE_CHECK: the ranks' " + slot + " do not match: rank 0 calls " +
                      describe(all[0]) + ", rank " + std::to_string(r) + " calls " +
                      describe(all[r]));
  }
}

}  // namespace

void checkCollectiveCall(const plan::CollArgs& args, uint64_t seq, int nranks,
                         const AllGatherFn& allGather) {
  CollRecord mine;
  mine.seq = seq;
  mine.count = args.count;
  mine.kind = static_cast<int32_t>(args.coll);
  mine.dtype = static_cast<int32_t>(args.dtype);
  mine.op = static_cast<int32_t>(args.op);
  mine.root = args.root;
  compareRecords(gatherRecords(mine, nranks, allGather));
}

}  // namespace grove::core
