#include "sgd_trainer/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>

namespace grove::examples {

namespace {

bool parseInt(const std::string& s, int lo, int* out) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < lo || v > 1000000000L) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseDouble(const std::string& s, double lo, double* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !std::isfinite(v) || v < lo) return false;
  *out = v;
  return true;
}

using Setter = std::function<bool(TrainerOptions*, const std::string&)>;

Setter intOpt(int TrainerOptions::*field, int lo) {
  return [=](TrainerOptions* o, const std::string& v) { return parseInt(v, lo, &(o->*field)); };
}

Setter dataInt(int DatasetSpec::*field, int lo) {
  return
      [=](TrainerOptions* o, const std::string& v) { return parseInt(v, lo, &(o->data.*field)); };
}

Setter floatOpt(float TrainerOptions::*field, double lo) {
  return [=](TrainerOptions* o, const std::string& v) {
    double d = 0;
    if (!parseDouble(v, lo, &d)) return false;
    o->*field = static_cast<float>(d);
    return true;
  };
}

const std::map<std::string, Setter>& valueOptions() {
  static const std::map<std::string, Setter> opts = {
      {"--epochs", intOpt(&TrainerOptions::epochs, 1)},
      {"--batch", intOpt(&TrainerOptions::batch, 1)},
      {"--hidden", intOpt(&TrainerOptions::hidden, 1)},
      {"--layers", intOpt(&TrainerOptions::hiddenLayers, 2)},
      {"--max-steps", intOpt(&TrainerOptions::maxSteps, 0)},
      {"--features", dataInt(&DatasetSpec::features, 1)},
      {"--classes", dataInt(&DatasetSpec::classes, 2)},
      {"--train-samples", dataInt(&DatasetSpec::trainSamples, 1)},
      {"--test-samples", dataInt(&DatasetSpec::testSamples, 0)},
      {"--lr", floatOpt(&TrainerOptions::lr, 0)},
      {"--momentum", floatOpt(&TrainerOptions::momentum, 0)},
      {"--seed",
       [](TrainerOptions* o, const std::string& v) {
         int s = 0;
         if (!parseInt(v, 0, &s)) return false;
         o->data.seed = static_cast<uint64_t>(s);
         return true;
       }},
      {"--bucket-mb",
       [](TrainerOptions* o, const std::string& v) { return parseDouble(v, 1e-6, &o->bucketMb); }},
      {"--timeout", [](TrainerOptions* o,
                       const std::string& v) { return parseDouble(v, 0.001, &o->timeoutSec); }},
      {"--loss",
       [](TrainerOptions* o, const std::string& v) {
         if (v == "xent")
           o->loss = Loss::kCrossEntropy;
         else if (v == "mse")
           o->loss = Loss::kMse;
         else
           return false;
         return true;
       }},
      {"--data",
       [](TrainerOptions* o, const std::string& v) {
         if (v == "real")
           o->data.kind = DataKind::kReal;
         else if (v == "integer")
           o->data.kind = DataKind::kInteger;
         else
           return false;
         return true;
       }},
      {"--save-weights",
       [](TrainerOptions* o, const std::string& v) {
         o->saveWeights = v;
         return !v.empty();
       }},
  };
  return opts;
}

}  // namespace

bool parseTrainerOptions(int argc, char** argv, TrainerOptions* opts, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool hasValue = false;
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    if (arg == "-h" || arg == "--help")
      opts->help = true;
    else if (arg == "--check")
      opts->check = true;
    else if (arg == "--no-overlap")
      opts->overlap = false;
    else if (auto it = valueOptions().find(arg); it != valueOptions().end()) {
      if (!hasValue) {
        if (i + 1 >= argc) {
          *error = "option " + arg + " needs a value";
          return false;
        }
        value = argv[++i];
      }
      if (!it->second(opts, value)) {
        *error = "bad value '" + value + "' for " + arg;
        return false;
      }
    } else {
      *error = "unknown option '" + arg + "'";
      return false;
    }
  }
  return true;
}

std::string trainerUsage(const std::string& prog) {
  return "usage: " + prog +
         " [options]   (run under grove-launch -n N, mpirun or torchrun)\n"
         "  --epochs E          passes over the training set (4)\n"
         "  --batch B           global batch, a multiple of the number of ranks (256)\n"
         "  --hidden W          width of each hidden layer (256)\n"
         "  --layers L          hidden layers, >= 2 (2)\n"
         "  --features D        input width (64)\n"
         "  --classes K         number of classes (10)\n"
         "  --train-samples N   training set size (16384)\n"
         "  --test-samples N    held-out set size (2048)\n"
         "  --data real|integer inputs: normal, or {-1,0,1} (real)\n"
         "  --loss xent|mse     softmax cross-entropy or squared error (xent)\n"
         "  --lr X --momentum M SGD with momentum (0.05, 0.9)\n"
         "  --seed S            data and initial-weight seed (1)\n"
         "  --bucket-mb X       gradient bucket cap in MiB (default: model/4, at most 25)\n"
         "  --no-overlap        all-reduce the buckets after backward instead of during it\n"
         "  --max-steps S       stop after S steps in all (0: no limit)\n"
         "  --check             verify that every rank ends with identical weights\n"
         "  --save-weights F    rank 0 writes the final weights to F\n"
         "  --timeout S         longest wait for a gradient all-reduce, seconds (120)\n";
}

std::vector<int> modelWidths(const TrainerOptions& opts) {
  std::vector<int> w{opts.data.features};
  for (int l = 0; l < opts.hiddenLayers; ++l) w.push_back(opts.hidden);
  w.push_back(opts.data.classes);
  return w;
}

int stepsPerEpoch(const TrainerOptions& opts) {
  const int steps = opts.data.trainSamples / opts.batch;
  if (steps < 1)
    throw std::invalid_argument("the training set (" + std::to_string(opts.data.trainSamples) +
                                " samples) is smaller than one global batch (" +
                                std::to_string(opts.batch) + ")");
  return steps;
}

uint64_t initSeed(const TrainerOptions& opts, int rank) {
  return opts.data.seed * 1000003ull + 17ull * static_cast<uint64_t>(rank) + 5ull;
}

std::vector<float> trainReference(const TrainerOptions& opts) {
  const Dataset data = makeDataset(opts.data);
  Mlp model(modelWidths(opts));
  model.initRandom(initSeed(opts, 0), opts.data.kind);
  SgdMomentum opt(model.numParams(), opts.lr, opts.momentum);
  const int steps = stepsPerEpoch(opts);
  std::vector<float> bx;
  std::vector<int> by;
  int done = 0;
  for (int e = 0; e < opts.epochs; ++e) {
    const std::vector<int> order = epochOrder(data.numTrain(), e, opts.data.seed);
    for (int s = 0; s < steps; ++s) {
      if (opts.maxSteps > 0 && done == opts.maxSteps) return model.params();
      gatherRows(data.trainX, data.trainY, data.features, rankBatch(order, s, opts.batch, 0, 1),
                 &bx, &by);
      model.trainBatch(bx.data(), by.data(), opts.batch, opts.loss, {});
      opt.step(model.params().data(), model.grads().data());
      ++done;
    }
  }
  return model.params();
}

void saveWeights(const std::string& path, const std::vector<float>& params) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = params.size();
  f.write("GRVW", 4);
  f.write(reinterpret_cast<const char*>(&n), sizeof(n));
  f.write(reinterpret_cast<const char*>(params.data()),
          static_cast<std::streamsize>(n * sizeof(float)));
  f.close();
  if (!f) throw std::runtime_error("cannot write weights to " + path + ": " + std::strerror(errno));
}

std::vector<float> loadWeights(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open weights file " + path);
  char magic[4] = {};
  uint64_t n = 0;
  f.read(magic, 4);
  f.read(reinterpret_cast<char*>(&n), sizeof(n));
  if (!f || std::memcmp(magic, "GRVW", 4) != 0 || n > (1ull << 34))
    throw std::runtime_error(path + " is not a weights file");
  std::vector<float> w(n);
  f.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!f) throw std::runtime_error(path + " is truncated");
  return w;
}

}  // namespace grove::examples
