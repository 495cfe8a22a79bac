// Gradient buckets as PyTorch DDP forms them.
//
// How it works: backward produces gradients from the last layer to the
// first, so the parameters are walked in reverse buffer order and packed
// greedily: a parameter joins the open bucket, and the bucket closes as soon
// as it holds at least `capBytes` (a parameter is never split, so one larger
// than the cap gets a bucket of its own). Because the buffer is laid out
// layer by layer, each bucket is one contiguous range of the gradient buffer
// and can be all-reduced in place with a single call. A bucket is ready when
// the lowest layer it touches has finished its backward; bucket 0 (the last
// layers) is ready first.
//
// DDP's default cap is 25 MB for models of hundreds of MB. The default here
// scales that to the model: a quarter of the model's size, at most 25 MiB,
// so a small model still gets a few buckets whose reduction can overlap the
// rest of backward.
#pragma once

#include <cstddef>
#include <vector>

#include "sgd_trainer/mlp.h"

namespace grove::examples {

/// One bucket: a contiguous range of the gradient buffer.
struct Bucket {
  size_t offset = 0;     ///< first gradient element
  size_t count = 0;      ///< number of elements
  int lowestLayer = 0;   ///< the bucket is ready once this layer's backward is done
  int highestLayer = 0;  ///< the last layer it holds gradients of
};

/// DDP's bucket size for big models (25 MiB).
inline constexpr size_t kDdpBucketBytes = 25u << 20;

/// The default cap for a model of modelBytes: min(25 MiB, modelBytes / 4),
/// at least 4 KiB.
size_t defaultBucketBytes(size_t modelBytes);

/// Packs the parameter ranges (in buffer order, as Mlp::ranges gives them)
/// into buckets of about capBytes, last parameters first. Throws
/// std::invalid_argument on a zero cap or ranges that are not contiguous.
std::vector<Bucket> planBuckets(const std::vector<ParamRange>& ranges, size_t capBytes);

}  // namespace grove::examples
