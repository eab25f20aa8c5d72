// The gradient sync of a process that is its own only replica, for comparing a trainer's step
// after backward (taken with any sync) against its workers stepping during it (taken without).
#pragma once

#include <span>

#include "core/gradient_sync.hpp"

namespace strata::testing {

// D = 1: every sum over the replicas is the sum over this one, so nothing is done.
class OneReplicaSync final : public GradientSync {
 public:
  int replica() const override { return 0; }
  int replicas() const override { return 1; }
  void gradients_ready(std::span<const Param>) override {}
  void finish() override {}
  void sum(std::span<double>) override {}
};

}  // namespace strata::testing
