// sgd_trainer: data-parallel SGD on a generated classification task, with
// grove doing the communication through its public C API only.
//
// How it works: every rank builds the same data set (dataset.h) and a model
// with its own random weights; rank 0's weights are broadcast so all start
// equal. Each step, rank r takes its B/N slice of the global batch, runs
// forward and backward (mlp.h), and GradSync (grad_sync.h) averages the
// gradients bucket by bucket on a host stream while backward is still
// running; then every rank applies the same SGD-with-momentum update to the
// same averaged gradients, so the weights stay identical without further
// communication. At the end of each epoch the ranks sum their statistics
// (a blocking all-reduce) and rank 0 prints loss, accuracy, the step time
// split into compute and exposed communication, and samples/s. --check
// broadcasts rank 0's final weights and counts bitwise differences.
//
// Ranks come from grove-launch, mpirun or torchrun variables
// (tools/common/launch_env.h).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sgd_trainer/grad_sync.h"
#include "sgd_trainer/options.h"
#include "tools/common/launch_env.h"

namespace grove::examples {
namespace {

// Per-epoch sums, all-reduced as doubles.
enum Stat {
  kLoss,
  kCorrect,
  kSamples,
  kTestCorrect,
  kTestSamples,
  kCompute,
  kExposed,
  kInFlight,
  kWall,
  kNumStats
};

struct Run {
  TrainerOptions opts;
  groveComm_t comm = nullptr;
  int rank = 0, nranks = 1;
  std::string launcher;
  double totalExposed = 0, totalInFlight = 0, totalCompute = 0;
};

void printHeader(const Run& run, const Mlp& model, const GradSync& sync, size_t capBytes) {
  std::string shape;
  for (int w : model.widths()) shape += (shape.empty() ? "" : "-") + std::to_string(w);
  std::printf(
      "# sgd_trainer: %d ranks (%s), model %s (%zu parameters, %.1f KiB), %s data, "
      "%s loss\n",
      run.nranks, run.launcher.c_str(), shape.c_str(), model.numParams(),
      model.numParams() * 4.0 / 1024, run.opts.data.kind == DataKind::kReal ? "real" : "integer",
      run.opts.loss == Loss::kCrossEntropy ? "cross-entropy" : "squared-error");
  std::printf("# global batch %d (%d per rank), %d steps per epoch, lr %g, momentum %g\n",
              run.opts.batch, run.opts.batch / run.nranks, stepsPerEpoch(run.opts),
              static_cast<double>(run.opts.lr), static_cast<double>(run.opts.momentum));
  std::printf("# %zu gradient buckets (cap %.1f KiB), all-reduced %s backward:",
              sync.buckets().size(), capBytes / 1024.0, run.opts.overlap ? "during" : "after");
  for (const Bucket& b : sync.buckets())
    std::printf(" [layers %d-%d, %.1f KiB]", b.lowestLayer, b.highestLayer, b.count * 4.0 / 1024);
  std::printf("\n");
}

// Loss and accuracy of this rank's share of the held-out set.
BatchStats evaluateShard(const Run& run, Mlp& model, const Dataset& data) {
  const int n = data.numTest();
  const int first = static_cast<int>(static_cast<int64_t>(n) * run.rank / run.nranks);
  const int last = static_cast<int>(static_cast<int64_t>(n) * (run.rank + 1) / run.nranks);
  BatchStats total;
  constexpr int kChunk = 512;
  for (int s = first; s < last; s += kChunk) {
    const int m = std::min(kChunk, last - s);
    const BatchStats st = model.evaluate(data.testX.data() + static_cast<size_t>(s) * data.features,
                                         data.testY.data() + s, m, run.opts.loss);
    total.correct += st.correct;
    total.samples += st.samples;
  }
  return total;
}

void reportEpoch(Run& run, int epoch, std::vector<double> stats, int steps) {
  checkGrove(groveAllReduce(stats.data(), stats.data(), stats.size(), groveFloat64, groveSum,
                            run.comm, nullptr),
             run.comm, "groveAllReduce of the epoch statistics");
  const double n = run.nranks;
  const double compute = stats[kCompute] / n, exposed = stats[kExposed] / n;
  const double inFlight = stats[kInFlight] / n;
  run.totalCompute += compute;
  run.totalExposed += exposed;
  run.totalInFlight += inFlight;
  if (run.rank != 0) return;
  const double ms = 1e3 / std::max(steps, 1);
  std::printf("epoch %d/%d  loss %.4f  acc %.1f%%", epoch + 1, run.opts.epochs,
              stats[kLoss] / stats[kSamples], 100.0 * stats[kCorrect] / stats[kSamples]);
  if (stats[kTestSamples] > 0)
    std::printf(" (held-out %.1f%%)", 100.0 * stats[kTestCorrect] / stats[kTestSamples]);
  std::printf(
      "  step %.2f ms = compute %.2f + exposed comm %.2f (comm in flight %.2f)"
      "  %.0f samples/s\n",
      (compute + exposed) * ms, compute * ms, exposed * ms, inFlight * ms,
      stats[kSamples] / (stats[kWall] / n));
  std::fflush(stdout);
}

// One step: forward/backward with bucket reductions, wait, update.
void trainStep(Mlp& model, GradSync& sync, SgdMomentum& opt, const std::vector<float>& bx,
               const std::vector<int>& by, const Run& run, std::vector<double>* stats) {
  const double t0 = nowSec();
  sync.beginStep();
  const BatchStats st = model.trainBatch(bx.data(), by.data(), static_cast<int>(by.size()),
                                         run.opts.loss, [&](int layer) { sync.layerDone(layer); });
  const double tBackward = nowSec();
  const SyncTimes comm = sync.finish();
  const double tSynced = nowSec();
  opt.step(model.params().data(), model.grads().data());
  const double t1 = nowSec();
  (*stats)[kLoss] += st.lossSum;
  (*stats)[kCorrect] += st.correct;
  (*stats)[kSamples] += st.samples;
  (*stats)[kCompute] += (tBackward - t0) + (t1 - tSynced);
  (*stats)[kExposed] += tSynced - tBackward;
  (*stats)[kInFlight] += comm.inFlight;
}

// Every rank compares its weights with rank 0's, bit for bit.
bool checkIdentical(const Run& run, const Mlp& model) {
  std::vector<float> ref = model.params();
  checkGrove(groveBroadcast(ref.data(), ref.data(), ref.size(), groveFloat32, 0, run.comm, nullptr),
             run.comm, "groveBroadcast of rank 0's weights");
  int64_t diff[2] = {0, 0};  // differing parameters, ranks that differ
  for (size_t i = 0; i < ref.size(); ++i)
    diff[0] += std::memcmp(&ref[i], &model.params()[i], sizeof(float)) != 0;
  diff[1] = diff[0] > 0;
  checkGrove(groveAllReduce(diff, diff, 2, groveInt64, groveSum, run.comm, nullptr), run.comm,
             "groveAllReduce of the check counts");
  if (run.rank == 0) {
    if (diff[0] == 0)
      std::printf("# check: all %d ranks hold bit-identical weights (%zu parameters)\n", run.nranks,
                  ref.size());
    else
      std::printf("# check FAILED: %" PRId64 " ranks differ from rank 0 in %" PRId64
                  " parameter values\n",
                  diff[1], diff[0]);
  }
  return diff[0] == 0;
}

int train(Run& run) {
  const TrainerOptions& o = run.opts;
  const Dataset data = makeDataset(o.data);
  Mlp model(modelWidths(o));
  model.initRandom(initSeed(o, run.rank), o.data.kind);  // differs per rank ...
  checkGrove(groveBroadcast(model.params().data(), model.params().data(), model.numParams(),
                            groveFloat32, 0, run.comm, nullptr),
             run.comm, "groveBroadcast of the initial weights");  // ... until rank 0's win
  const size_t modelBytes = model.numParams() * sizeof(float);
  const size_t cap =
      o.bucketMb > 0 ? static_cast<size_t>(o.bucketMb * (1 << 20)) : defaultBucketBytes(modelBytes);
  GradSync sync(run.comm, model.grads().data(),
                planBuckets(model.ranges(), std::max<size_t>(cap, 4)), o.overlap, o.timeoutSec);
  SgdMomentum opt(model.numParams(), o.lr, o.momentum);
  if (run.rank == 0) printHeader(run, model, sync, cap);
  const int steps = stepsPerEpoch(o);
  std::vector<float> bx;
  std::vector<int> by;
  int done = 0;
  for (int e = 0; e < o.epochs && (o.maxSteps == 0 || done < o.maxSteps); ++e) {
    const std::vector<int> order = epochOrder(data.numTrain(), e, o.data.seed);
    std::vector<double> stats(kNumStats, 0.0);
    const double t0 = nowSec();
    int s = 0;
    for (; s < steps && (o.maxSteps == 0 || done < o.maxSteps); ++s, ++done) {
      gatherRows(data.trainX, data.trainY, data.features,
                 rankBatch(order, s, o.batch, run.rank, run.nranks), &bx, &by);
      trainStep(model, sync, opt, bx, by, run, &stats);
    }
    stats[kWall] = nowSec() - t0;
    const BatchStats test = evaluateShard(run, model, data);
    stats[kTestCorrect] = test.correct;
    stats[kTestSamples] = test.samples;
    reportEpoch(run, e, stats, s);
  }
  if (run.rank == 0) {
    std::printf(
        "# overlap: communication in flight %.1f ms, exposed %.1f ms (%.0f%% hidden "
        "behind backward), compute %.1f ms\n",
        run.totalInFlight * 1e3, run.totalExposed * 1e3,
        run.totalInFlight > 0 ? 100.0 * (1.0 - run.totalExposed / run.totalInFlight) : 0.0,
        run.totalCompute * 1e3);
    if (!o.saveWeights.empty()) saveWeights(o.saveWeights, model.params());
  }
  return o.check && !checkIdentical(run, model) ? 1 : 0;
}

int runMain(int argc, char** argv) {
  setlinebuf(stdout);
  Run run;
  std::string error;
  if (!parseTrainerOptions(argc, argv, &run.opts, &error)) {
    std::fprintf(stderr, "sgd_trainer: %s\n%s", error.c_str(), trainerUsage("sgd_trainer").c_str());
    return 2;
  }
  if (run.opts.help) {
    std::printf("%s", trainerUsage("sgd_trainer").c_str());
    return 0;
  }
  const tools::LaunchEnv env = tools::detectLaunchEnv();
  run.rank = env.rank;
  run.nranks = env.nranks;
  run.launcher = env.source;
  if (run.opts.batch % env.nranks != 0) {
    std::fprintf(stderr,
                 "sgd_trainer: the global batch (%d) must be a multiple of the number of "
                 "ranks (%d)\n",
                 run.opts.batch, env.nranks);
    return 2;
  }
  try {
    stepsPerEpoch(run.opts);  // validates the sizes before any rank waits for others
    Mlp probe(modelWidths(run.opts));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sgd_trainer: %s\n", e.what());
    return 2;
  }
  if (tools::initCommFromEnv(env, &run.comm, nullptr) != groveSuccess) {
    std::fprintf(stderr, "sgd_trainer: %s\n", tools::launchEnvLastError());
    return 1;
  }
  try {
    const int rc = train(run);
    checkGrove(groveCommDestroy(run.comm), nullptr, "groveCommDestroy");
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sgd_trainer: rank %d: %s\n", run.rank, e.what());
    groveCommAbort(run.comm);  // the other ranks fail fast instead of timing out
    return 1;
  }
}

}  // namespace
}  // namespace grove::examples

int main(int argc, char** argv) { return grove::examples::runMain(argc, argv); }
