#include "core/gradient_engine.hpp"

#include <stdexcept>

namespace strata {

namespace {

[[noreturn]] void not_on_device(const char* call) {
  throw std::logic_error(std::string(call) + ": this gradient engine takes no optimizer steps");
}

}  // namespace

GradientEngine::Result GradientEngine::add_micro_batch(
    const Tensor& /*images*/, std::span<const std::int32_t> /*labels*/, double /*grad_divisor*/,
    std::uint64_t /*step*/, std::uint64_t /*first_sample*/, int /*index*/, int /*count*/) {
  not_on_device("GradientEngine::add_micro_batch");
}

void GradientEngine::apply_step(double /*lr*/) {
  not_on_device("GradientEngine::apply_step");
}

GradientEngine::Result GradientEngine::train_step(const Tensor& images,
                                                  std::span<const std::int32_t> labels,
                                                  double grad_divisor, double lr,
                                                  std::uint64_t step, std::uint64_t first_sample) {
  const Result result = add_micro_batch(images, labels, grad_divisor, step, first_sample, 0, 1);
  apply_step(lr);
  return result;
}

void GradientEngine::upload_state(const std::vector<Param>& /*params*/, Optimizer& /*optimizer*/) {
  not_on_device("GradientEngine::upload_state");
}

void GradientEngine::download_state(const std::vector<Param>& /*params*/,
                                    Optimizer& /*optimizer*/) {
  not_on_device("GradientEngine::download_state");
}

}  // namespace strata
