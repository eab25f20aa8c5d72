// DeviceModel's shards of the model-parallel layers: this rank's slice of a column- or row-split
// dense layer or a channel-split convolution, and the collectives over the model's shards that
// make their outputs and input gradients those of the unsplit layer.
#include <cstdint>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_model.hpp"
#include "cuda/device_model_stage.hpp"

namespace strata::cuda {

namespace {

// The shards' gathered blocks [shards][rows][part] side by side, as the unsplit layer lays them
// out: shard m's block fills columns [m*part, (m+1)*part) of out [rows, shards*part].
void interleave_shard_columns(const float* gathered, float* out, std::int64_t rows,
                              std::int64_t part, int shards, const Stream& stream) {
  const std::size_t width = static_cast<std::size_t>(part) * sizeof(float);
  for (int m = 0; m < shards; ++m)
    check(cudaMemcpy2DAsync(out + m * part, width * static_cast<std::size_t>(shards),
                            gathered + m * rows * part, width, width,
                            static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, stream.get()),
          "cudaMemcpy2DAsync (the shards' outputs side by side)");
}

// The inverse: shard `shard`'s columns of whole [rows, shards*part] into mine [rows, part].
void slice_shard_columns(const float* whole, float* mine, std::int64_t rows, std::int64_t part,
                         int shard, int shards, const Stream& stream) {
  const std::size_t width = static_cast<std::size_t>(part) * sizeof(float);
  check(cudaMemcpy2DAsync(mine, width, whole + shard * part,
                          width * static_cast<std::size_t>(shards), width,
                          static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, stream.get()),
        "cudaMemcpy2DAsync (this shard's columns)");
}

}  // namespace

void DeviceModel::split_forward(Stage& st, const float* in, float* out, std::int64_t batch) {
  const cudaStream_t stream = context_.stream.get();
  const float* weight = params_[static_cast<std::size_t>(st.weight)].value.data();
  const float* bias = params_[static_cast<std::size_t>(st.bias)].value.data();
  if (st.split == Stage::Split::row) {
    // Each shard's product of its slice of the inputs; summed over the shards, then the bias once.
    dense_forward(context_.blas, {batch, st.in_size, st.out_size}, in, weight, nullptr, out,
                  stream);
    shards_->sum(out, static_cast<std::size_t>(batch * st.out_size), context_.stream);
    add_row_bias(out, bias, batch, st.out_size, stream);
    return;
  }
  float* mine = out;
  if (st.gather) {
    resize(context_.allocator, st.shard_output, batch * st.shard_out);
    mine = st.shard_output.data();
  }
  if (st.kind == Stage::Kind::dense)
    dense_forward(context_.blas, {batch, st.in_size, st.shard_out}, in, weight, bias, mine, stream);
  else
    st.convolution->forward(in, weight, bias, mine);
  if (!st.gather) return;
  resize(context_.allocator, st.gathered, batch * st.out_size);
  shards_->allgather(mine, st.gathered.data(), static_cast<std::size_t>(batch * st.shard_out),
                     context_.stream);
  interleave_shard_columns(st.gathered.data(), out, batch, st.shard_out, shards_->shards(),
                           context_.stream);
}

void DeviceModel::split_backward(Stage& st, const float* in, const float* grad_out, float* grad_in,
                                 std::int64_t batch) {
  Parameter& w = params_[static_cast<std::size_t>(st.weight)];
  Parameter& b = params_[static_cast<std::size_t>(st.bias)];
  const float* dy = grad_out;
  if (st.gather) {
    resize(context_.allocator, st.shard_grad, batch * st.shard_out);
    slice_shard_columns(grad_out, st.shard_grad.data(), batch, st.shard_out, shards_->shard(),
                        shards_->shards(), context_.stream);
    dy = st.shard_grad.data();
  }
  const std::int64_t outputs = st.split == Stage::Split::row ? st.out_size : st.shard_out;
  if (st.kind == Stage::Kind::dense)
    dense_backward(context_.blas, {batch, st.in_size, outputs}, in, w.value.data(), dy,
                   w.grad.data(), b.grad.data(), grad_in, context_.stream.get());
  else
    st.convolution->backward(in, w.value.data(), dy, w.grad.data(), b.grad.data(), grad_in);
  // A column shard's outputs depend on the whole input: the input gradient is the sum over shards.
  if (st.split == Stage::Split::column && grad_in != nullptr)
    shards_->sum(grad_in, static_cast<std::size_t>(batch * st.in_size), context_.stream);
}

}  // namespace strata::cuda
