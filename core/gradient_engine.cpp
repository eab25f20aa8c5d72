#include "core/gradient_engine.hpp"

#include <stdexcept>

namespace strata {

namespace {

[[noreturn]] void not_on_device(const char* call) {
  throw std::logic_error(std::string(call) + ": this gradient engine takes no optimizer steps");
}

}  // namespace

GradientEngine::Result GradientEngine::train_step(const Tensor& /*images*/,
                                                  std::span<const std::int32_t> /*labels*/,
                                                  double /*grad_divisor*/, double /*lr*/,
                                                  std::uint64_t /*step*/,
                                                  std::uint64_t /*first_sample*/) {
  not_on_device("GradientEngine::train_step");
}

void GradientEngine::upload_state(const std::vector<Param>& /*params*/, Optimizer& /*optimizer*/) {
  not_on_device("GradientEngine::upload_state");
}

void GradientEngine::download_state(const std::vector<Param>& /*params*/,
                                    Optimizer& /*optimizer*/) {
  not_on_device("GradientEngine::download_state");
}

}  // namespace strata
