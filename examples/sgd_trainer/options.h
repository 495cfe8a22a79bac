// Command-line options of sgd_trainer, and the 1-rank reference training
// that the tests compare the data-parallel runs against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sgd_trainer/dataset.h"
#include "sgd_trainer/mlp.h"

namespace grove::examples {

/// Everything a training run depends on.
struct TrainerOptions {
  int epochs = 4;                   ///< passes over the training set
  int batch = 256;                  ///< global batch (all ranks together)
  int hidden = 256;                 ///< width of each hidden layer
  int hiddenLayers = 2;             ///< number of hidden layers (>= 2)
  int maxSteps = 0;                 ///< stop after this many steps in all (0: no limit)
  float lr = 0.05f;                 ///< learning rate
  float momentum = 0.9f;            ///< SGD momentum
  Loss loss = Loss::kCrossEntropy;  ///< training loss
  DatasetSpec data;                 ///< the generated task
  double bucketMb = 0;              ///< bucket cap in MiB (0: scaled to the model)
  bool overlap = true;              ///< reduce buckets during backward (false: after it)
  bool check = false;               ///< verify that all ranks hold identical weights
  std::string saveWeights;          ///< rank 0 writes the final weights here
  double timeoutSec = 120;          ///< longest wait for a gradient reduction
  bool help = false;                ///< --help was given
};

/// Parses argv; on a bad option returns false and sets *error.
bool parseTrainerOptions(int argc, char** argv, TrainerOptions* opts, std::string* error);

/// The usage text.
std::string trainerUsage(const std::string& prog);

/// Layer widths {features, hidden x hiddenLayers, classes}.
std::vector<int> modelWidths(const TrainerOptions& opts);

/// Training steps per epoch (whole global batches only); throws
/// std::invalid_argument when the training set holds less than one batch.
int stepsPerEpoch(const TrainerOptions& opts);

/// Seed of rank `rank`'s own random initial weights (rank 0's are the ones
/// every rank ends up with, after the broadcast).
uint64_t initSeed(const TrainerOptions& opts, int rank);

/// Trains on one process without communication: the same initial weights as
/// rank 0 of a data-parallel run, global batch opts.batch, same steps. The
/// final parameters are what every rank of an N-rank run must hold.
std::vector<float> trainReference(const TrainerOptions& opts);

/// Writes the parameters to path ("GRVW", uint64 count, float32 values);
/// throws std::runtime_error on an I/O failure.
void saveWeights(const std::string& path, const std::vector<float>& params);

/// Reads a file written by saveWeights; throws std::runtime_error when it is
/// missing or malformed.
std::vector<float> loadWeights(const std::string& path);

}  // namespace grove::examples
