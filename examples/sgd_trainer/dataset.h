// The trainer's data: a classification task generated from a fixed seed, so
// it needs no download and every rank can build the same set on its own.
//
// How it works: inputs are drawn from a portable generator (splitmix64, the
// same numbers on every platform and compiler); a "teacher" network with
// random weights (features -> teacher width, tanh -> classes) labels each
// input with the argmax of its outputs. A student that learns the task well
// recovers the teacher's decision boundaries, so accuracy far above chance
// shows that training works. Inputs are either real (standard normal) or
// integer-valued ({-1, 0, 1}); the latter keeps sums of products exact in
// float for the first update, which lets the tests compare N-rank and 1-rank
// training bit for bit.
//
// Each epoch visits the training samples in a permutation that depends only
// on (seed, epoch). Global batch `step` is positions [step*B, (step+1)*B) of
// that order; rank r of N takes the r-th contiguous slice of B/N of them, so
// the ranks' slices never overlap and together form the global batch.
#pragma once

#include <cstdint>
#include <vector>

namespace grove::examples {

/// Deterministic pseudo-random numbers (splitmix64): the same sequence for a
/// seed on every platform, unlike the std:: distributions.
class Rng {
 public:
  /// A generator whose sequence depends only on `seed`.
  explicit Rng(uint64_t seed) : state_(seed) {}
  /// The next 64 random bits.
  uint64_t next();
  /// Uniform in [0, 1).
  double uniform();
  /// Standard normal (Box-Muller).
  double normal();
  /// Uniform integer in [0, n).
  int below(int n);

 private:
  uint64_t state_;
};

/// Kind of input values.
enum class DataKind {
  kReal,     ///< standard normal inputs
  kInteger,  ///< inputs in {-1, 0, 1}
};

/// What to generate.
struct DatasetSpec {
  int features = 64;                ///< input width
  int classes = 10;                 ///< number of labels
  int trainSamples = 16384;         ///< size of the training set
  int testSamples = 2048;           ///< size of the held-out set
  int teacherWidth = 64;            ///< hidden width of the labelling teacher
  DataKind kind = DataKind::kReal;  ///< input values
  uint64_t seed = 1;                ///< everything follows from this
};

/// A generated data set: row-major inputs and their labels.
struct Dataset {
  int features = 0;           ///< input width
  int classes = 0;            ///< number of labels
  std::vector<float> trainX;  ///< trainSamples x features
  std::vector<int> trainY;    ///< trainSamples labels in [0, classes)
  std::vector<float> testX;   ///< testSamples x features
  std::vector<int> testY;     ///< testSamples labels
  /// Number of training samples.
  int numTrain() const { return static_cast<int>(trainY.size()); }
  /// Number of held-out samples.
  int numTest() const { return static_cast<int>(testY.size()); }
};

/// Generates the data set `spec` describes (throws std::invalid_argument on
/// sizes below 1).
Dataset makeDataset(const DatasetSpec& spec);

/// The order in which epoch `epoch` visits the n training samples: a
/// permutation of [0, n) that depends only on (seed, epoch).
std::vector<int> epochOrder(int n, int epoch, uint64_t seed);

/// Indices of rank `rank`'s share of global batch `step` (batch B over
/// nranks ranks, B a multiple of nranks): order[step*B + rank*B/nranks ...],
/// B/nranks of them.
std::vector<int> rankBatch(const std::vector<int>& order, int step, int batch, int rank,
                           int nranks);

/// Copies the rows `idx` of x (rows of `width` floats) and their labels into
/// contiguous buffers (resized as needed).
void gatherRows(const std::vector<float>& x, const std::vector<int>& y, int width,
                const std::vector<int>& idx, std::vector<float>* bx, std::vector<int>* by);

}  // namespace grove::examples
