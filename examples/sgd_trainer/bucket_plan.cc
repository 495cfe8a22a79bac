#include "sgd_trainer/bucket_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace grove::examples {

size_t defaultBucketBytes(size_t modelBytes) {
  return std::max<size_t>(4096, std::min(kDdpBucketBytes, modelBytes / 4));
}

std::vector<Bucket> planBuckets(const std::vector<ParamRange>& ranges, size_t capBytes) {
  if (capBytes == 0) throw std::invalid_argument("bucket size must be > 0 bytes");
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].offset != ranges[i - 1].offset + ranges[i - 1].count)
      throw std::invalid_argument("parameter " + ranges[i].name +
                                  " does not follow its predecessor in the buffer");
  std::vector<Bucket> buckets;
  bool open = false;
  Bucket cur;
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
    if (!open) {
      cur = Bucket{it->offset + it->count, 0, it->layer, it->layer};
      open = true;
    }
    cur.offset = it->offset;  // walking backwards: the range grows downwards
    cur.count += it->count;
    cur.lowestLayer = std::min(cur.lowestLayer, it->layer);
    cur.highestLayer = std::max(cur.highestLayer, it->layer);
    if (cur.count * sizeof(float) >= capBytes) {
      buckets.push_back(cur);
      open = false;
    }
  }
  if (open) buckets.push_back(cur);
  return buckets;
}

}  // namespace grove::examples
