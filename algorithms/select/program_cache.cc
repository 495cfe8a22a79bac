#include "algorithms/select/program_cache.h"

#include <algorithm>

namespace grove::plan {

ProgramKey programKey(Algo algo, const CollArgs& a, const PlanParams& p) {
  ProgramKey k;
  k.coll = a.coll;
  k.algo = algo;
  k.count = a.count;
  k.dtype = static_cast<int>(a.dtype);
  k.op = static_cast<int>(a.op);
  k.root = a.root;
  k.rank = a.rank;
  k.nranks = a.nranks;
  k.inPlace = a.inPlace;
  k.nChannels = p.nChannels;
  k.chunkBytes = p.chunkBytes;
  k.planBytes = p.planBytes;
  return k;
}

ProgramCache::ProgramCache(size_t capacity, TopoPlans* plans)
    : capacity_(std::max<size_t>(capacity, 1)), plans_(plans) {}

std::shared_ptr<const Program> ProgramCache::get(Algo algo, const CollArgs& args,
                                                 const PlanParams& params) {
  const ProgramKey key = programKey(algo, args, params);
  auto it = map_.find(key);
  if (it != map_.end()) {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.program;
  }
  ++misses_;
  auto program = std::make_shared<const Program>(build(algo, args, params, plans_));
  if (map_.size() >= capacity_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  map_.emplace(key, Entry{program, lru_.begin()});
  return program;
}

void ProgramCache::clear() {
  map_.clear();
  lru_.clear();
}

}  // namespace grove::plan
