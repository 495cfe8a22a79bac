// A multi-layer perceptron with plain host math, and SGD with momentum.
//
// How it works: layer l maps width[l] inputs to width[l+1] outputs,
// z = a W + b, followed by ReLU on every layer but the last (whose outputs
// are the logits). All parameters live in one flat float buffer, layer by
// layer (W0, b0, W1, b1, ...), with W stored input-major (in x out) so the
// inner loops of the forward pass and of the weight gradient run over
// contiguous outputs. The gradients use the same layout in a second buffer,
// which is what the gradient buckets slice.
//
// trainBatch runs forward, the loss, and backward from the last layer to the
// first; as soon as layer l's weight and bias gradients are final it calls
// onLayerDone(l), so a data-parallel wrapper can start reducing them while
// the earlier layers are still being differentiated. Gradients are the mean
// over the batch (the loss is the batch mean). Every sum over samples runs in
// sample order, so a given batch gives the same bits on every run.
//
// Losses: softmax cross-entropy, or mean squared error against the one-hot
// label (0.5 * ||z - onehot||^2), whose gradient z - onehot needs no
// exponential -- with integer-valued data and weights it stays exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sgd_trainer/dataset.h"

namespace grove::examples {

/// Training loss.
enum class Loss {
  kCrossEntropy,  ///< softmax cross-entropy
  kMse,           ///< 0.5 * squared distance to the one-hot label
};

/// One parameter tensor inside the flat buffer.
struct ParamRange {
  std::string name;   ///< "W0", "b0", ...
  int layer = 0;      ///< layer it belongs to
  size_t offset = 0;  ///< first element in the flat buffer
  size_t count = 0;   ///< number of elements
};

/// Loss and correct predictions summed over a batch.
struct BatchStats {
  double lossSum = 0;  ///< sum of the per-sample losses
  int correct = 0;     ///< samples whose argmax equals the label
  int samples = 0;     ///< samples seen
};

/// The model: widths {features, hidden..., classes}.
class Mlp {
 public:
  /// Builds the model; throws std::invalid_argument unless there are at
  /// least two hidden layers and every width is >= 1.
  explicit Mlp(std::vector<int> widths);

  /// Number of layers (weight matrices).
  int numLayers() const { return static_cast<int>(widths_.size()) - 1; }
  /// Layer widths, inputs first.
  const std::vector<int>& widths() const { return widths_; }
  /// Total number of parameters.
  size_t numParams() const { return params_.size(); }
  /// The parameter tensors in buffer order.
  const std::vector<ParamRange>& ranges() const { return ranges_; }
  /// The flat parameters.
  std::vector<float>& params() { return params_; }
  /// The flat parameters (read-only).
  const std::vector<float>& params() const { return params_; }
  /// The flat gradients of the last trainBatch.
  std::vector<float>& grads() { return grads_; }

  /// Random initial weights (He-uniform for real data; {-1,0,1} times a power
  /// of two near 1/sqrt(fan-in) for integer data), zero biases.
  void initRandom(uint64_t seed, DataKind kind);

  /// Forward, loss and backward on m samples (x: m x features, y: labels);
  /// leaves the batch-mean gradients in grads() and calls onLayerDone(l)
  /// (may be empty) for l = last ... 0 as each layer's gradients become final.
  BatchStats trainBatch(const float* x, const int* y, int m, Loss loss,
                        const std::function<void(int)>& onLayerDone);

  /// Loss and accuracy on m samples, without touching the gradients.
  BatchStats evaluate(const float* x, const int* y, int m, Loss loss);

 private:
  void forward(const float* x, int m);
  BatchStats lossAndGrad(const int* y, int m, Loss loss, bool wantGrad);
  void backwardLayer(int l, int m);

  std::vector<int> widths_;
  std::vector<ParamRange> ranges_;  // W0, b0, W1, b1, ...
  std::vector<float> params_, grads_;
  std::vector<std::vector<float>>
      acts_;  // acts_[l]: input of layer l (m x widths_[l]); last: logits
  std::vector<std::vector<float>> delta_;  // delta_[l]: dLoss/dz of layer l (m x widths_[l+1])
};

/// SGD with momentum as PyTorch defines it: v = momentum * v + g; w -= lr * v.
class SgdMomentum {
 public:
  /// An optimizer for n parameters with zero initial velocity.
  SgdMomentum(size_t n, float lr, float momentum);
  /// One update of w (n elements) with gradient g.
  void step(float* w, const float* g);

 private:
  float lr_, momentum_;
  std::vector<float> velocity_;
};

}  // namespace grove::examples
