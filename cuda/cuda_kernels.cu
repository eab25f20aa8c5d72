#include "cuda/cuda_kernels.hpp"

#include <cmath>
#include <string>

#include "core/stream_hash.hpp"
#include "cuda/cuda_check.hpp"

namespace strata::cuda {
namespace {

constexpr int threads_per_block = 256;

int blocks_for(std::int64_t n) {
  return static_cast<int>((n + threads_per_block - 1) / threads_per_block);
}

// The launch's own error (a bad configuration); faults inside a kernel surface at the next
// synchronizing call.
void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
}

__global__ void activation_forward_kernel(Activation kind, float alpha, const float* x, float* y,
                                          std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  switch (kind) {
    case Activation::relu:
      y[i] = x[i] > 0.0f ? x[i] : 0.0f;
      break;
    case Activation::leaky_relu:
      y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
      break;
    case Activation::tanh:
      y[i] = tanhf(x[i]);
      break;
    case Activation::sigmoid:
      y[i] = 1.0f / (1.0f + expf(-x[i]));
      break;
  }
}

__global__ void activation_backward_kernel(Activation kind, float alpha, const float* x,
                                           const float* y, const float* dy, float* dx,
                                           std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  switch (kind) {
    case Activation::relu:
      dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
      break;
    case Activation::leaky_relu:
      dx[i] = x[i] > 0.0f ? dy[i] : alpha * dy[i];
      break;
    case Activation::tanh:
      dx[i] = dy[i] * (1.0f - y[i] * y[i]);
      break;
    case Activation::sigmoid:
      dx[i] = dy[i] * y[i] * (1.0f - y[i]);
      break;
  }
}

__global__ void dropout_forward_kernel(const float* x, float* y, float* mask, std::int64_t rows,
                                       std::int64_t per_row, DropoutNoise noise) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * per_row) return;
  const auto row = static_cast<std::uint64_t>(i / per_row);
  const auto within = static_cast<std::uint64_t>(i % per_row);
  const std::uint64_t key =
      derive_key(derive_key(seed_key(noise.key), noise.step), noise.first_sample + row);
  const float keep_scale = 1.0f / (1.0f - noise.rate);
  mask[i] = uniform24(stream_draw(key, within + 1)) < noise.rate ? 0.0f : keep_scale;
  y[i] = x[i] * mask[i];
}

__global__ void multiply_kernel(const float* a, const float* b, float* out, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i];
}

__global__ void add_row_bias_kernel(float* m, const float* bias, std::int64_t rows,
                                    std::int64_t cols) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < rows * cols) m[i] += bias[i % cols];
}

// One thread per column, rows in order: the same order as the CPU's loop, so that a column sum
// does not depend on the launch.
__global__ void column_sums_kernel(const float* m, float* sums, std::int64_t rows,
                                   std::int64_t cols) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float sum = 0.0f;
  for (std::int64_t r = 0; r < rows; ++r) sum += m[r * cols + c];
  sums[c] = sum;
}

__global__ void accumulate_kernel(const float* from, float* into, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) into[i] += from[i];
}

// One thread per row: a row holds a handful of classes. The log-sum-exp is in double, as on the
// CPU.
__global__ void softmax_cross_entropy_kernel(const float* logits, const std::int32_t* labels,
                                             float* row_loss, float* grad, std::int64_t batch,
                                             std::int64_t classes, float inv) {
  const std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (b >= batch) return;
  const float* z = logits + b * classes;
  float* g = grad + b * classes;
  float zmax = z[0];
  for (std::int64_t c = 1; c < classes; ++c) zmax = fmaxf(zmax, z[c]);
  double sum = 0.0;
  for (std::int64_t c = 0; c < classes; ++c) sum += exp(static_cast<double>(z[c] - zmax));
  const double log_sum = log(sum);
  const std::int32_t label = labels[b];
  row_loss[b] = static_cast<float>(log_sum - static_cast<double>(z[label] - zmax));
  for (std::int64_t c = 0; c < classes; ++c) {
    const double p = exp(static_cast<double>(z[c] - zmax) - log_sum);
    g[c] = static_cast<float>(p - (c == label ? 1.0 : 0.0)) * inv;
  }
}

__global__ void sgd_kernel(float* w, const float* g, float* v, std::int64_t n, SgdStep s) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float d = g[i] + s.weight_decay * w[i];
  if (s.momentum != 0.0f) {
    v[i] = s.first_step ? d : s.momentum * v[i] + d;
    d = s.nesterov ? d + s.momentum * v[i] : v[i];
  }
  w[i] -= s.lr * d;
}

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, std::int64_t n,
                            AdamStep s) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float d = g[i] + s.weight_decay * w[i];
  m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * d;
  v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * d * d;
  w[i] -= s.step_size * m[i] / (sqrtf(v[i]) * s.inv_bias2 + s.eps);
}

}  // namespace

void activation_forward(Activation kind, float alpha, const float* in, float* out, std::int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return;
  activation_forward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(kind, alpha, in, out,
                                                                             n);
  check_launch("activation_forward");
}

void activation_backward(Activation kind, float alpha, const float* in, const float* out,
                         const float* grad_out, float* grad_in, std::int64_t n,
                         cudaStream_t stream) {
  if (n == 0) return;
  activation_backward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(kind, alpha, in, out,
                                                                              grad_out, grad_in, n);
  check_launch("activation_backward");
}

void dropout_forward(const float* in, float* out, float* mask, std::int64_t rows,
                     std::int64_t per_row, const DropoutNoise& noise, cudaStream_t stream) {
  if (rows * per_row == 0) return;
  dropout_forward_kernel<<<blocks_for(rows * per_row), threads_per_block, 0, stream>>>(
      in, out, mask, rows, per_row, noise);
  check_launch("dropout_forward");
}

void dropout_backward(const float* grad_out, const float* mask, float* grad_in, std::int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return;
  multiply_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(grad_out, mask, grad_in, n);
  check_launch("dropout_backward");
}

void add_row_bias(float* rows_data, const float* bias, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_row_bias_kernel<<<blocks_for(rows * cols), threads_per_block, 0, stream>>>(rows_data, bias,
                                                                                 rows, cols);
  check_launch("add_row_bias");
}

void column_sums(const float* m, float* sums, std::int64_t rows, std::int64_t cols,
                 cudaStream_t stream) {
  if (cols == 0) return;
  column_sums_kernel<<<blocks_for(cols), threads_per_block, 0, stream>>>(m, sums, rows, cols);
  check_launch("column_sums");
}

void accumulate(const float* from, float* into, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  accumulate_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(from, into, n);
  check_launch("accumulate");
}

void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* row_loss,
                           float* grad, std::int64_t batch, std::int64_t classes,
                           float grad_divisor, cudaStream_t stream) {
  if (batch == 0) return;
  softmax_cross_entropy_kernel<<<blocks_for(batch), threads_per_block, 0, stream>>>(
      logits, labels, row_loss, grad, batch, classes,
      static_cast<float>(1.0 / static_cast<double>(grad_divisor)));
  check_launch("softmax_cross_entropy");
}

void sgd_update(float* weights, const float* grads, float* velocity, std::int64_t n,
                const SgdStep& step, cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(weights, grads, velocity, n, step);
  check_launch("sgd_update");
}

void adam_update(float* weights, const float* grads, float* first_moment, float* second_moment,
                 std::int64_t n, const AdamStep& step, cudaStream_t stream) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(weights, grads, first_moment,
                                                               second_moment, n, step);
  check_launch("adam_update");
}

}  // namespace strata::cuda
