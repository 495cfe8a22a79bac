// End-to-end tests of examples/sgd_trainer: real ranks under grove-launch
// (and under torchrun-style variables alone), compared with a 1-rank
// training run in this process that uses the same model code but no grove.
//
//  - N-rank data-parallel training with global batch B ends with the same
//    weights as 1-rank training with batch B, for N = 1, 2, 4: bit for bit
//    with integer-valued data (one step, where every float sum is exact, so
//    the different reduction order cannot matter), within a float tolerance
//    with real data over many steps (and N = 3 for an odd rank count);
//  - the loss falls and --check finds every rank's weights identical;
//  - overlap hides communication: exposed < in-flight time, while the
//    --no-overlap order is measured as fully exposed;
//  - bad input gets a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "mp_spawn.h"
#include "sgd_trainer/options.h"

namespace {

using grove::examples::TrainerOptions;
using mptest::RunResult;

// Options as the trainer would parse them from `args`.
TrainerOptions parse(const std::vector<std::string>& args) {
  std::vector<std::string> words = {"sgd_trainer"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  TrainerOptions o;
  std::string error;
  EXPECT_TRUE(
      grove::examples::parseTrainerOptions(static_cast<int>(argv.size()), argv.data(), &o, &error))
      << error;
  return o;
}

// grove-launch -n n sgd_trainer args...
RunResult launch(int n, std::vector<std::string> args, const std::string& dir,
                 std::vector<std::string> env = {}) {
  std::vector<std::string> argv = {
      GROVE_LAUNCH_PATH, "-n", std::to_string(n), "--timeout", "100", "--", SGD_TRAINER_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back("GROVE_TIMEOUT=30");
  return mptest::runCommand(argv, env, 120, dir + "/out.txt");
}

// Trains on n ranks, saving the weights; returns them (empty on failure).
std::vector<float> trainOnRanks(int n, std::vector<std::string> args, std::string* output) {
  const std::string dir = mptest::makeTempDir("sgd");
  args.insert(args.end(), {"--check", "--save-weights", dir + "/w.bin"});
  RunResult r = launch(n, args, dir);
  *output = r.output;
  EXPECT_TRUE(r.ok()) << mptest::describeStatus(r.status) << "\n" << mptest::tail(r.output);
  if (!r.ok()) return {};
  EXPECT_NE(r.output.find("# check: all " + std::to_string(n) + " ranks hold bit-identical"),
            std::string::npos)
      << r.output;
  return grove::examples::loadWeights(dir + "/w.bin");
}

// Per-epoch losses printed by rank 0.
std::vector<double> epochLosses(const std::string& out) {
  std::vector<double> losses;
  const std::regex re("epoch [0-9]+/[0-9]+  loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

// (in flight, exposed) milliseconds from the "# overlap:" line.
std::pair<double, double> overlapTimes(const std::string& out) {
  std::smatch m;
  const std::regex re("communication in flight ([0-9.]+) ms, exposed ([0-9.]+) ms");
  if (!std::regex_search(out, m, re)) {
    ADD_FAILURE() << "no overlap line in:\n" << out;
    return {0, 0};
  }
  return {std::stod(m[1]), std::stod(m[2])};
}

// Integer-valued inputs in {-1,0,1}, weights in {-1,0,1}*2^-k, squared-error
// loss, power-of-two batch and learning rate: every product and sum of the
// first step is exact in float.
const std::vector<std::string> kIntegerArgs = {
    "--data",          "integer", "--loss",         "mse", "--features",  "8",
    "--hidden",        "8",       "--classes",      "4",   "--batch",     "16",
    "--train-samples", "64",      "--test-samples", "0",   "--lr",        "0.0078125",
    "--momentum",      "0.5",     "--max-steps",    "1",   "--bucket-mb", "0.0001"};

TEST(SgdTrainer, IntegerDataMatchesOneRankBitForBit) {
  const TrainerOptions o = parse(kIntegerArgs);
  const std::vector<float> ref = grove::examples::trainReference(o);
  // The step must have moved the weights, or the comparison proves nothing.
  grove::examples::Mlp init(grove::examples::modelWidths(o));
  init.initRandom(grove::examples::initSeed(o, 0), o.data.kind);
  ASSERT_EQ(init.params().size(), ref.size());
  size_t moved = 0;
  for (size_t i = 0; i < ref.size(); ++i) moved += init.params()[i] != ref[i];
  EXPECT_GT(moved, ref.size() / 4);
  for (int n : {1, 2, 4}) {
    std::string out;
    const std::vector<float> w = trainOnRanks(n, kIntegerArgs, &out);
    ASSERT_EQ(w.size(), ref.size()) << n << " ranks\n" << out;
    EXPECT_EQ(std::memcmp(w.data(), ref.data(), w.size() * sizeof(float)), 0)
        << n << " ranks: weights differ from 1-rank training";
  }
}

TEST(SgdTrainer, RealDataMatchesOneRankWithinTolerance) {
  const std::vector<std::string> args = {
      "--features",      "16",  "--hidden",       "32", "--layers", "3", "--batch",     "48",
      "--train-samples", "960", "--test-samples", "96", "--epochs", "3", "--bucket-mb", "0.002"};
  const std::vector<float> ref = grove::examples::trainReference(parse(args));
  for (int n : {1, 2, 3, 4}) {
    std::string out;
    const std::vector<float> w = trainOnRanks(n, args, &out);
    ASSERT_EQ(w.size(), ref.size()) << n << " ranks\n" << out;
    double worst = 0;
    for (size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::fabs(double(w[i]) - ref[i]) / (1.0 + std::fabs(ref[i])));
    EXPECT_LT(worst, 1e-4) << n << " ranks: largest relative difference " << worst;
  }
}

TEST(SgdTrainer, LossFallsAndRanksAgree) {
  std::string out;
  const std::vector<float> w = trainOnRanks(
      4, {"--epochs", "4", "--hidden", "64", "--train-samples", "4096", "--batch", "128"}, &out);
  const std::vector<double> losses = epochLosses(out);
  ASSERT_EQ(losses.size(), 4u) << out;
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << out;
  EXPECT_NE(out.find("4 ranks (grove-launch)"), std::string::npos) << out;
}

TEST(SgdTrainer, OverlapHidesCommunication) {
  const std::vector<std::string> args = {"--epochs",   "2",  "--train-samples", "4096",
                                         "--features", "64", "--hidden",        "128",
                                         "--layers",   "3",  "--bucket-mb",     "0.02"};
  std::string out;
  trainOnRanks(4, args, &out);
  const auto [inFlight, exposed] = overlapTimes(out);
  EXPECT_GT(inFlight, 0.0) << out;
  EXPECT_LT(exposed, inFlight) << out;
  // Issued after backward, nothing is hidden: the measurement must see that.
  std::vector<std::string> naive = args;
  naive.push_back("--no-overlap");
  trainOnRanks(4, naive, &out);
  const auto [naiveInFlight, naiveExposed] = overlapTimes(out);
  EXPECT_GE(naiveExposed, naiveInFlight) << out;
}

TEST(SgdTrainer, RunsUnderTorchrunVariables) {
  const std::string dir = mptest::makeTempDir("sgd_torchrun");
  const int port = mptest::freePort();
  ASSERT_GT(port, 0);
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::string> env = {
        "GROVE_RANK",
        "GROVE_NRANKS",
        "GROVE_LOCAL_RANK",
        "GROVE_COMM_ID",
        "RANK=" + std::to_string(r),
        "WORLD_SIZE=2",
        "LOCAL_RANK=" + std::to_string(r),
        "MASTER_ADDR=127.0.0.1",
        "MASTER_PORT=" + std::to_string(port),
        "GROVE_TIMEOUT=30",
        "GROVE_COMM_SECRET=sgd-trainer-test-" + std::to_string(port)};
    pids.push_back(mptest::spawn(
        {SGD_TRAINER_PATH, "--epochs", "1", "--train-samples", "1024", "--hidden", "32", "--check"},
        env, dir + "/out" + std::to_string(r) + ".txt"));
  }
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    const bool ended = mptest::waitFor(pids[r], 100, &status);
    if (!ended) mptest::killGroup(pids[r]);
    const std::string out = mptest::readFile(dir + "/out" + std::to_string(r) + ".txt");
    ASSERT_TRUE(ended) << "rank " << r << " hung\n" << out;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << mptest::describeStatus(status) << "\n"
        << out;
  }
  const std::string out0 = mptest::readFile(dir + "/out0.txt");
  EXPECT_NE(out0.find("2 ranks (torchrun)"), std::string::npos) << out0;
  EXPECT_NE(out0.find("# check: all 2 ranks hold bit-identical"), std::string::npos) << out0;
}

TEST(SgdTrainer, BadInputGetsAClearError) {
  const std::string dir = mptest::makeTempDir("sgd_bad");
  RunResult r = launch(3, {"--batch", "16"}, dir);
  EXPECT_EQ(WEXITSTATUS(r.status), 2) << r.output;
  EXPECT_NE(r.output.find("global batch (16) must be a multiple of the number of ranks (3)"),
            std::string::npos)
      << r.output;
  r = launch(1, {"--layers", "1"}, dir);
  EXPECT_EQ(WEXITSTATUS(r.status), 2) << r.output;
  EXPECT_NE(r.output.find("bad value '1' for --layers"), std::string::npos) << r.output;
  r = launch(1, {"--bogus"}, dir);
  EXPECT_EQ(WEXITSTATUS(r.status), 2) << r.output;
  EXPECT_NE(r.output.find("unknown option '--bogus'"), std::string::npos) << r.output;
  r = launch(2, {"--batch", "512", "--train-samples", "100"}, dir);
  EXPECT_EQ(WEXITSTATUS(r.status), 2) << r.output;
  EXPECT_NE(r.output.find("smaller than one global batch"), std::string::npos) << r.output;
}

}  // namespace
