#include "sgd_trainer/dataset.h"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace grove::examples {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int Rng::below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }

namespace {

void fillInputs(Rng& rng, DataKind kind, std::vector<float>* x) {
  for (float& v : *x) {
    if (kind == DataKind::kReal)
      v = static_cast<float>(rng.normal());
    else
      v = static_cast<float>(rng.below(3) - 1);
  }
}

// The teacher: features -> width (tanh) -> classes, Gaussian weights.
struct Teacher {
  int features, width, classes;
  std::vector<double> w1, w2;

  Teacher(int f, int w, int c, uint64_t seed) : features(f), width(w), classes(c) {
    Rng rng(seed ^ 0x7465616368657221ull);
    w1.resize(static_cast<size_t>(f) * w);
    w2.resize(static_cast<size_t>(w) * c);
    for (double& v : w1) v = rng.normal() / std::sqrt(static_cast<double>(f));
    for (double& v : w2) v = rng.normal() / std::sqrt(static_cast<double>(w));
  }

  // Logits of every row of x (n x features) -> n x classes.
  std::vector<double> logits(const std::vector<float>& x) const {
    const size_t n = x.size() / static_cast<size_t>(features);
    std::vector<double> out(n * static_cast<size_t>(classes), 0.0);
    std::vector<double> h(static_cast<size_t>(width));
    for (size_t s = 0; s < n; ++s) {
      for (int j = 0; j < width; ++j) {
        double a = 0;
        for (int i = 0; i < features; ++i)
          a += x[s * features + i] * w1[static_cast<size_t>(i) * width + j];
        h[j] = std::tanh(a);
      }
      for (int k = 0; k < classes; ++k) {
        double a = 0;
        for (int j = 0; j < width; ++j) a += h[j] * w2[static_cast<size_t>(j) * classes + k];
        out[s * classes + k] = a;
      }
    }
    return out;
  }
};

std::vector<int> argmaxLabels(const std::vector<double>& logits, const std::vector<double>& shift,
                              int classes) {
  std::vector<int> y(logits.size() / static_cast<size_t>(classes));
  for (size_t s = 0; s < y.size(); ++s) {
    int best = 0;
    for (int k = 1; k < classes; ++k)
      if (logits[s * classes + k] - shift[k] > logits[s * classes + best] - shift[best]) best = k;
    y[s] = best;
  }
  return y;
}

}  // namespace

Dataset makeDataset(const DatasetSpec& spec) {
  if (spec.features < 1 || spec.classes < 2 || spec.trainSamples < 1 || spec.testSamples < 0 ||
      spec.teacherWidth < 1)
    throw std::invalid_argument(
        "data set: need features >= 1, classes >= 2, train samples >= 1, test samples >= 0 "
        "(got features " +
        std::to_string(spec.features) + ", classes " + std::to_string(spec.classes) + ", train " +
        std::to_string(spec.trainSamples) + ", test " + std::to_string(spec.testSamples) + ")");
  Dataset d;
  d.features = spec.features;
  d.classes = spec.classes;
  Rng rng(spec.seed);
  d.trainX.resize(static_cast<size_t>(spec.trainSamples) * spec.features);
  d.testX.resize(static_cast<size_t>(spec.testSamples) * spec.features);
  fillInputs(rng, spec.kind, &d.trainX);
  fillInputs(rng, spec.kind, &d.testX);

  const Teacher teacher(spec.features, spec.teacherWidth, spec.classes, spec.seed);
  const std::vector<double> trainLogits = teacher.logits(d.trainX);
  // Centre each class's logit on its training mean so the labels are roughly
  // balanced (a random teacher otherwise favours a few classes).
  std::vector<double> shift(static_cast<size_t>(spec.classes), 0.0);
  for (size_t s = 0; s < static_cast<size_t>(spec.trainSamples); ++s)
    for (int k = 0; k < spec.classes; ++k) shift[k] += trainLogits[s * spec.classes + k];
  for (double& v : shift) v /= spec.trainSamples;
  d.trainY = argmaxLabels(trainLogits, shift, spec.classes);
  d.testY = argmaxLabels(teacher.logits(d.testX), shift, spec.classes);
  return d;
}

std::vector<int> epochOrder(int n, int epoch, uint64_t seed) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed * 0x100000001b3ull + static_cast<uint64_t>(epoch) + 1);
  for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);  // Fisher-Yates
  return order;
}

std::vector<int> rankBatch(const std::vector<int>& order, int step, int batch, int rank,
                           int nranks) {
  if (nranks < 1 || batch % nranks != 0 || rank < 0 || rank >= nranks)
    throw std::invalid_argument("rankBatch: batch " + std::to_string(batch) +
                                " is not a multiple of " + std::to_string(nranks) + " ranks");
  const int local = batch / nranks;
  const size_t first = static_cast<size_t>(step) * batch + static_cast<size_t>(rank) * local;
  if (first + local > order.size())
    throw std::invalid_argument("rankBatch: step " + std::to_string(step) +
                                " runs past the end of the epoch");
  return {order.begin() + static_cast<std::ptrdiff_t>(first),
          order.begin() + static_cast<std::ptrdiff_t>(first + local)};
}

void gatherRows(const std::vector<float>& x, const std::vector<int>& y, int width,
                const std::vector<int>& idx, std::vector<float>* bx, std::vector<int>* by) {
  bx->resize(idx.size() * static_cast<size_t>(width));
  by->resize(idx.size());
  for (size_t r = 0; r < idx.size(); ++r) {
    const size_t src = static_cast<size_t>(idx[r]) * width;
    std::copy(x.begin() + static_cast<std::ptrdiff_t>(src),
              x.begin() + static_cast<std::ptrdiff_t>(src + width),
              bx->begin() + static_cast<std::ptrdiff_t>(r * width));
    (*by)[r] = y[static_cast<size_t>(idx[r])];
  }
}

}  // namespace grove::examples
