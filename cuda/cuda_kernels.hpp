// The small CUDA kernels of a training step: activations, the loss, bias and gradient sums, and
// the optimizers' updates. Each takes device pointers and a stream and returns at once; each
// computes exactly what its CPU counterpart in core/ does, element by element.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

// ActivationLayer's kinds; alpha is LeakyReLU's negative slope.
enum class Activation { relu, leaky_relu, tanh, sigmoid };
// out = f(in) (ActivationLayer::forward).
void activation_forward(Activation kind, float alpha, const float* in, float* out, std::int64_t n,
                        cudaStream_t stream);
// grad_in = f'(in) grad_out, from the input for the piecewise-linear kinds and from the output for
// tanh and sigmoid (ActivationLayer::backward).
void activation_backward(Activation kind, float alpha, const float* in, const float* out,
                         const float* grad_out, float* grad_in, std::int64_t n,
                         cudaStream_t stream);

// DropoutLayer in training: row r of `rows` (each `per_row` floats) draws its mask from the stream
// derive_seed(key, {step, first_sample + r}), element j from that stream's (j+1)-th number, so
// the mask is bit for bit the CPU's. mask = 0 where the draw is below `rate`, else 1/(1-rate);
// out = in mask.
struct DropoutNoise {
  std::uint64_t key = 0, step = 0, first_sample = 0;
  float rate = 0.0f;
};
void dropout_forward(const float* in, float* out, float* mask, std::int64_t rows,
                     std::int64_t per_row, const DropoutNoise& noise, cudaStream_t stream);
// grad_in = grad_out mask.
void dropout_backward(const float* grad_out, const float* mask, float* grad_in, std::int64_t n,
                      cudaStream_t stream);

// rows x cols, row-major: every row += bias (the dense layer's bias).
void add_row_bias(float* rows_data, const float* bias, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream);
// sums[c] = sum over rows of m[r, c] (the dense layer's bias gradient).
void column_sums(const float* m, float* sums, std::int64_t rows, std::int64_t cols,
                 cudaStream_t stream);
// into += from (gradient accumulation over micro-batches).
void accumulate(const float* from, float* into, std::int64_t n, cudaStream_t stream);

// Softmax cross-entropy over logits [batch, classes] and labels (core/loss.hpp): row_loss[r] =
// -log softmax(logits[r])[labels[r]], and grad = (softmax - onehot) / grad_divisor.
void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* row_loss,
                           float* grad, std::int64_t batch, std::int64_t classes,
                           float grad_divisor, cudaStream_t stream);

// SgdOptimizer::update on n elements: d = g + wd w; with momentum v = first ? d : mu v + d and
// d = nesterov ? d + mu v : v; then w -= lr d.
struct SgdStep {
  float lr = 0.0f, momentum = 0.0f, weight_decay = 0.0f;
  bool nesterov = false, first_step = false;
};
void sgd_update(float* weights, const float* grads, float* velocity, std::int64_t n,
                const SgdStep& step, cudaStream_t stream);

// AdamOptimizer::update on n elements, with step_size = lr / (1 - beta1^t) and
// inv_bias2 = 1 / sqrt(1 - beta2^t).
struct AdamStep {
  float step_size = 0.0f, inv_bias2 = 1.0f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f,
        weight_decay = 0.0f;
};
void adam_update(float* weights, const float* grads, float* first_moment, float* second_moment,
                 std::int64_t n, const AdamStep& step, cudaStream_t stream);

}  // namespace strata::cuda
