// Hierarchical classification: super-classes over the labels, a coarse classifier that picks one,
// and a sub-classifier per super-class that picks the class within it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/tensor.hpp"
#include "ensemble/combiners.hpp"

namespace strata {

struct Hierarchy {
  std::vector<std::string> names;  // super-class s's name
  std::vector<std::vector<int>>
      classes;  // its classes, in the order its sub-classifier numbers them

  int super_classes() const { return static_cast<int>(classes.size()); }
  // super_of()[c]: the super-class of class c (of `num_classes`). Throws std::invalid_argument
  // naming a class that is in no super-class, or in two.
  std::vector<int> super_of(int num_classes) const;
};

// The class of every sample: its most probable super-class under `coarse`, then, within that
// super-class, the most probable class under its sub-classifier (`subs[s]`; a super-class of one
// class needs none). Ties go to the lower index, as predicted_classes does.
std::vector<int> route(const Hierarchy& hierarchy, const Predictions& coarse,
                       const std::vector<std::optional<Predictions>>& subs);

// The model layers with every hidden dense layer's units and conv layer's filters scaled by one
// factor (the last layer with parameters keeps its size), chosen so that the model for
// `input_shape` and `num_classes` has as close to `parameters` parameters as such scaling gets.
std::vector<LayerSpec> widen_to(const std::vector<LayerSpec>& layers, const Shape& input_shape,
                                int num_classes, std::int64_t parameters);

std::int64_t parameter_count(const std::vector<LayerSpec>& layers, const Shape& input_shape,
                             int num_classes);

}  // namespace strata
