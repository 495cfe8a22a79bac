#include "sgd_trainer/mlp.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace grove::examples {

Mlp::Mlp(std::vector<int> widths) : widths_(std::move(widths)) {
  if (widths_.size() < 4) throw std::invalid_argument("the model needs at least two hidden layers");
  for (int w : widths_)
    if (w < 1)
      throw std::invalid_argument("every layer width must be >= 1 (got " + std::to_string(w) + ")");
  size_t offset = 0;
  for (int l = 0; l < numLayers(); ++l) {
    const size_t in = static_cast<size_t>(widths_[l]), out = static_cast<size_t>(widths_[l + 1]);
    ranges_.push_back({std::string(1, 'W').append(std::to_string(l)), l, offset, in * out});
    offset += in * out;
    ranges_.push_back({std::string(1, 'b').append(std::to_string(l)), l, offset, out});
    offset += out;
  }
  params_.assign(offset, 0.0f);
  grads_.assign(offset, 0.0f);
  acts_.resize(widths_.size());
  delta_.resize(static_cast<size_t>(numLayers()));
}

void Mlp::initRandom(uint64_t seed, DataKind kind) {
  Rng rng(seed);
  std::fill(params_.begin(), params_.end(), 0.0f);  // biases stay zero
  for (int l = 0; l < numLayers(); ++l) {
    const ParamRange& w = ranges_[static_cast<size_t>(2 * l)];
    const double fanIn = widths_[l];
    if (kind == DataKind::kReal) {
      const double bound = std::sqrt(6.0 / fanIn);
      for (size_t i = 0; i < w.count; ++i)
        params_[w.offset + i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
    } else {
      // {-1, 0, 1} * 2^-k with 2^-k near 1/sqrt(fan-in): exact products.
      const float scale = std::ldexp(1.0f, -static_cast<int>(std::lround(0.5 * std::log2(fanIn))));
      for (size_t i = 0; i < w.count; ++i)
        params_[w.offset + i] = static_cast<float>(rng.below(3) - 1) * scale;
    }
  }
}

void Mlp::forward(const float* x, int m) {
  acts_[0].assign(x, x + static_cast<size_t>(m) * widths_[0]);
  for (int l = 0; l < numLayers(); ++l) {
    const int in = widths_[l], out = widths_[l + 1];
    const float* W = params_.data() + ranges_[static_cast<size_t>(2 * l)].offset;
    const float* b = params_.data() + ranges_[static_cast<size_t>(2 * l + 1)].offset;
    const std::vector<float>& a = acts_[static_cast<size_t>(l)];
    std::vector<float>& z = acts_[static_cast<size_t>(l + 1)];
    z.resize(static_cast<size_t>(m) * out);
    const bool relu = l + 1 < numLayers();
    for (int s = 0; s < m; ++s) {
      float* zs = z.data() + static_cast<size_t>(s) * out;
      std::copy(b, b + out, zs);
      for (int i = 0; i < in; ++i) {
        const float av = a[static_cast<size_t>(s) * in + i];
        if (av == 0.0f) continue;  // ReLU zeros contribute nothing
        const float* Wi = W + static_cast<size_t>(i) * out;
        for (int o = 0; o < out; ++o) zs[o] += av * Wi[o];
      }
      if (relu)
        for (int o = 0; o < out; ++o) zs[o] = zs[o] > 0.0f ? zs[o] : 0.0f;
    }
  }
}

BatchStats Mlp::lossAndGrad(const int* y, int m, Loss loss, bool wantGrad) {
  const int k = widths_.back();
  const std::vector<float>& z = acts_.back();
  std::vector<float>& d = delta_.back();
  if (wantGrad) d.resize(static_cast<size_t>(m) * k);
  BatchStats st;
  st.samples = m;
  const float invM = 1.0f / static_cast<float>(m);
  for (int s = 0; s < m; ++s) {
    const float* zs = z.data() + static_cast<size_t>(s) * k;
    const int label = y[s];
    if (label < 0 || label >= k)
      throw std::invalid_argument("label " + std::to_string(label) + " out of range");
    const int pred = static_cast<int>(std::max_element(zs, zs + k) - zs);
    st.correct += pred == label;
    float* ds = wantGrad ? d.data() + static_cast<size_t>(s) * k : nullptr;
    if (loss == Loss::kCrossEntropy) {
      const double zmax = zs[pred];
      double sum = 0;
      for (int c = 0; c < k; ++c) sum += std::exp(zs[c] - zmax);
      st.lossSum += std::log(sum) - (zs[label] - zmax);
      if (ds)
        for (int c = 0; c < k; ++c)
          ds[c] = (static_cast<float>(std::exp(zs[c] - zmax) / sum) - (c == label)) * invM;
    } else {
      for (int c = 0; c < k; ++c) {
        const float diff = zs[c] - static_cast<float>(c == label);
        st.lossSum += 0.5 * static_cast<double>(diff) * diff;
        if (ds) ds[c] = diff * invM;
      }
    }
  }
  return st;
}

void Mlp::backwardLayer(int l, int m) {
  const int in = widths_[l], out = widths_[l + 1];
  const ParamRange& wr = ranges_[static_cast<size_t>(2 * l)];
  const ParamRange& br = ranges_[static_cast<size_t>(2 * l + 1)];
  float* dW = grads_.data() + wr.offset;
  float* db = grads_.data() + br.offset;
  const std::vector<float>& a = acts_[static_cast<size_t>(l)];
  const std::vector<float>& d = delta_[static_cast<size_t>(l)];
  std::fill(dW, dW + wr.count, 0.0f);
  std::fill(db, db + br.count, 0.0f);
  for (int s = 0; s < m; ++s) {  // samples in order: a fixed summation order
    const float* ds = d.data() + static_cast<size_t>(s) * out;
    for (int i = 0; i < in; ++i) {
      const float av = a[static_cast<size_t>(s) * in + i];
      if (av == 0.0f) continue;
      float* dWi = dW + static_cast<size_t>(i) * out;
      for (int o = 0; o < out; ++o) dWi[o] += av * ds[o];
    }
    for (int o = 0; o < out; ++o) db[o] += ds[o];
  }
}

BatchStats Mlp::trainBatch(const float* x, const int* y, int m, Loss loss,
                           const std::function<void(int)>& onLayerDone) {
  if (m < 1) throw std::invalid_argument("trainBatch: empty batch");
  forward(x, m);
  BatchStats st = lossAndGrad(y, m, loss, true);
  for (int l = numLayers() - 1; l >= 0; --l) {
    backwardLayer(l, m);
    if (onLayerDone) onLayerDone(l);  // layer l's gradients are final
    if (l == 0) break;
    // delta of layer l-1 = (delta_l W_l^T) masked by ReLU'(z_{l-1}).
    const int in = widths_[l], out = widths_[l + 1];
    const float* W = params_.data() + ranges_[static_cast<size_t>(2 * l)].offset;
    const std::vector<float>& d = delta_[static_cast<size_t>(l)];
    const std::vector<float>& a = acts_[static_cast<size_t>(l)];
    std::vector<float>& dPrev = delta_[static_cast<size_t>(l - 1)];
    dPrev.resize(static_cast<size_t>(m) * in);
    for (int s = 0; s < m; ++s) {
      const float* ds = d.data() + static_cast<size_t>(s) * out;
      for (int i = 0; i < in; ++i) {
        float acc = 0.0f;
        if (a[static_cast<size_t>(s) * in + i] > 0.0f) {
          const float* Wi = W + static_cast<size_t>(i) * out;
          for (int o = 0; o < out; ++o) acc += ds[o] * Wi[o];
        }
        dPrev[static_cast<size_t>(s) * in + i] = acc;
      }
    }
  }
  return st;
}

BatchStats Mlp::evaluate(const float* x, const int* y, int m, Loss loss) {
  if (m < 1) return {};
  forward(x, m);
  return lossAndGrad(y, m, loss, false);
}

SgdMomentum::SgdMomentum(size_t n, float lr, float momentum)
    : lr_(lr), momentum_(momentum), velocity_(n, 0.0f) {}

void SgdMomentum::step(float* w, const float* g) {
  for (size_t i = 0; i < velocity_.size(); ++i) {
    velocity_[i] = momentum_ * velocity_[i] + g[i];
    w[i] -= lr_ * velocity_[i];
  }
}

}  // namespace grove::examples
