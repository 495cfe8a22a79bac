#include "core/call_check.h"

#include <cstring>
#include <string>

#include "base/error.h"
#include "exec/call_tag.h"

namespace grove::core {
namespace {

// What a collective call is, as every rank records it: its slot and its tag.
struct CollRecord {
  uint64_t seq = 0;
  exec::CallTag tag;
};

bool sameCall(const CollRecord& a, const CollRecord& b) {
  return a.seq == b.seq && exec::sameCall(a.tag, b.tag);
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
                      exec::describeCall(all[0].tag) + ", rank " + std::to_string(r) + " calls " +
                      exec::describeCall(all[r].tag));
  }
}

}  // namespace

void checkCollectiveCall(const plan::CollArgs& args, uint64_t seq, int nranks,
                         const AllGatherFn& allGather) {
  CollRecord mine;
  mine.seq = seq;
  mine.tag = exec::callTagOf(args, args.rank);
  compareRecords(gatherRecords(mine, nranks, allGather));
}

}  // namespace grove::core
