// Unit tests of examples/sgd_trainer's pure parts: the MLP's gradients
// against finite differences, the layer-done order, SGD with momentum, DDP
// bucket packing, the data set and the rank split, option parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "sgd_trainer/bucket_plan.h"
#include "sgd_trainer/options.h"

namespace {

using namespace grove::examples;

// Mean loss of a batch, in double, at the model's current parameters.
double meanLoss(Mlp& m, const std::vector<float>& x, const std::vector<int>& y, Loss loss) {
  const BatchStats st = m.evaluate(x.data(), y.data(), static_cast<int>(y.size()), loss);
  return st.lossSum / st.samples;
}

void gradientCheck(Loss loss) {
  DatasetSpec spec;
  spec.features = 5;
  spec.classes = 3;
  spec.trainSamples = 6;
  spec.testSamples = 0;
  const Dataset d = makeDataset(spec);
  Mlp m({5, 7, 6, 3});
  m.initRandom(3, DataKind::kReal);
  for (size_t i = 0; i < m.numParams(); ++i)  // non-zero biases too
    if (m.params()[i] == 0.0f) m.params()[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
  m.trainBatch(d.trainX.data(), d.trainY.data(), 6, loss, {});
  const std::vector<float> grads = m.grads();
  const double h = 1e-3;
  int checked = 0;
  for (size_t i = 0; i < m.numParams(); i += 3, ++checked) {
    const float w0 = m.params()[i];
    m.params()[i] = static_cast<float>(w0 + h);
    const double up = meanLoss(m, d.trainX, d.trainY, loss);
    m.params()[i] = static_cast<float>(w0 - h);
    const double down = meanLoss(m, d.trainX, d.trainY, loss);
    m.params()[i] = w0;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(grads[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "parameter " << i;
  }
  EXPECT_GT(checked, 30);
}

TEST(SgdModel, GradientsMatchFiniteDifferencesCrossEntropy) { gradientCheck(Loss::kCrossEntropy); }
TEST(SgdModel, GradientsMatchFiniteDifferencesSquaredError) { gradientCheck(Loss::kMse); }

TEST(SgdModel, LayersReportDoneLastFirstAndRejectsShallowModels) {
  Mlp m({4, 8, 8, 8, 2});
  m.initRandom(1, DataKind::kReal);
  const std::vector<float> x(8, 0.5f);
  const std::vector<int> y = {0, 1};
  std::vector<int> seen;
  m.trainBatch(x.data(), y.data(), 2, Loss::kCrossEntropy, [&](int l) { seen.push_back(l); });
  EXPECT_EQ(seen, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_THROW(Mlp({4, 8, 2}), std::invalid_argument);
  EXPECT_THROW(Mlp({4, 0, 8, 2}), std::invalid_argument);
}

TEST(SgdModel, MomentumFollowsTheDefinition) {
  SgdMomentum opt(2, 0.5f, 0.25f);
  std::vector<float> w = {1.0f, -1.0f};
  const std::vector<float> g = {2.0f, 4.0f};
  opt.step(w.data(), g.data());  // v = g
  EXPECT_EQ(w, (std::vector<float>{0.0f, -3.0f}));
  opt.step(w.data(), g.data());  // v = 0.25 g + g = 1.25 g
  EXPECT_EQ(w, (std::vector<float>{-1.25f, -5.5f}));
}

TEST(SgdBuckets, PackLastLayersFirstIntoContiguousRanges) {
  Mlp m({8, 16, 16, 4});  // W0 128, b0 16, W1 256, b1 16, W2 64, b2 4
  // Walking back: b2 + W2 = 68 >= 60 closes; b1 + W1 = 272; b0 + W0 = 144.
  const std::vector<Bucket> b = planBuckets(m.ranges(), 60 * sizeof(float));
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].offset, 128u + 16 + 256 + 16);
  EXPECT_EQ(b[0].count, 68u);
  EXPECT_EQ(b[0].lowestLayer, 2);
  EXPECT_EQ(b[1].count, 272u);
  EXPECT_EQ(b[1].lowestLayer, 1);
  EXPECT_EQ(b[2].offset, 0u);
  EXPECT_EQ(b[2].lowestLayer, 0);
  // A larger cap merges layers 1 and 2: ready only when layer 1 is done.
  const std::vector<Bucket> merged = planBuckets(m.ranges(), 100 * sizeof(float));
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].count, 340u);
  EXPECT_EQ(merged[0].lowestLayer, 1);
  EXPECT_EQ(merged[0].highestLayer, 2);
  size_t total = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    total += b[i].count;
    if (i > 0) {
      EXPECT_EQ(b[i].offset + b[i].count, b[i - 1].offset);
    }
  }
  EXPECT_EQ(total, m.numParams());
  EXPECT_EQ(planBuckets(m.ranges(), 1u << 30).size(), 1u);
  EXPECT_EQ(planBuckets(m.ranges(), 1).size(), m.ranges().size());
  EXPECT_THROW(planBuckets(m.ranges(), 0), std::invalid_argument);
  EXPECT_EQ(defaultBucketBytes(1000u << 20), kDdpBucketBytes);
  EXPECT_EQ(defaultBucketBytes(400000), 100000u);
}

TEST(SgdData, DeterministicBalancedAndSplitWithoutOverlap) {
  DatasetSpec spec;
  spec.trainSamples = 2000;
  const Dataset a = makeDataset(spec), b = makeDataset(spec);
  EXPECT_EQ(a.trainX, b.trainX);
  EXPECT_EQ(a.trainY, b.trainY);
  std::vector<int> perClass(static_cast<size_t>(spec.classes), 0);
  for (int y : a.trainY) ++perClass[static_cast<size_t>(y)];
  for (int c : perClass) EXPECT_GT(c, 2000 / spec.classes / 4) << "labels badly unbalanced";
  spec.kind = DataKind::kInteger;
  for (float v : makeDataset(spec).trainX) ASSERT_TRUE(v == -1.0f || v == 0.0f || v == 1.0f);

  const std::vector<int> order = epochOrder(100, 2, 7);
  EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), 100u);
  EXPECT_NE(order, epochOrder(100, 3, 7));
  std::vector<int> joined;
  for (int r = 0; r < 4; ++r) {
    const std::vector<int> part = rankBatch(order, 1, 20, r, 4);
    EXPECT_EQ(part.size(), 5u);
    joined.insert(joined.end(), part.begin(), part.end());
  }
  EXPECT_EQ(joined, std::vector<int>(order.begin() + 20, order.begin() + 40));
  EXPECT_THROW(rankBatch(order, 0, 10, 0, 3), std::invalid_argument);
  EXPECT_THROW(rankBatch(order, 5, 20, 0, 4), std::invalid_argument);
}

TEST(SgdOptions, ParsesAndRejects) {
  auto parse = [](std::vector<std::string> words, TrainerOptions* o, std::string* err) {
    words.insert(words.begin(), "sgd_trainer");
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    return parseTrainerOptions(static_cast<int>(argv.size()), argv.data(), o, err);
  };
  TrainerOptions o;
  std::string err;
  ASSERT_TRUE(parse({"--batch", "64", "--lr=0.5", "--loss", "mse", "--data", "integer",
                     "--no-overlap", "--check", "--layers", "3"},
                    &o, &err))
      << err;
  EXPECT_EQ(o.batch, 64);
  EXPECT_EQ(o.lr, 0.5f);
  EXPECT_EQ(o.loss, Loss::kMse);
  EXPECT_EQ(o.data.kind, DataKind::kInteger);
  EXPECT_FALSE(o.overlap);
  EXPECT_TRUE(o.check);
  EXPECT_EQ(modelWidths(o), (std::vector<int>{64, 256, 256, 256, 10}));
  EXPECT_FALSE(parse({"--batch", "0"}, &o, &err));
  EXPECT_EQ(err, "bad value '0' for --batch");
  EXPECT_FALSE(parse({"--loss", "hinge"}, &o, &err));
  EXPECT_FALSE(parse({"--epochs"}, &o, &err));
  EXPECT_EQ(err, "option --epochs needs a value");
  EXPECT_FALSE(parse({"--frobnicate"}, &o, &err));
  o = TrainerOptions{};
  o.data.trainSamples = 10;
  EXPECT_THROW(stepsPerEpoch(o), std::invalid_argument);
}

}  // namespace
