#include "transfer/hierarchy.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/model.hpp"

namespace strata {

std::vector<int> Hierarchy::super_of(int num_classes) const {
  std::vector<int> of(static_cast<std::size_t>(num_classes), -1);
  for (int s = 0; s < super_classes(); ++s)
    for (int c : classes[static_cast<std::size_t>(s)]) {
      if (c < 0 || c >= num_classes)
        throw std::invalid_argument(
            fmt::format("super-class {}: class {} is not below the data's {} classes",
                        names[static_cast<std::size_t>(s)], c, num_classes));
      if (of[static_cast<std::size_t>(c)] >= 0)
        throw std::invalid_argument(
            fmt::format("class {} is in super-classes {} and {}", c,
                        names[static_cast<std::size_t>(of[static_cast<std::size_t>(c)])],
                        names[static_cast<std::size_t>(s)]));
      of[static_cast<std::size_t>(c)] = s;
    }
  for (int c = 0; c < num_classes; ++c)
    if (of[static_cast<std::size_t>(c)] < 0)
      throw std::invalid_argument(fmt::format("class {} is in no super-class", c));
  return of;
}

std::vector<int> route(const Hierarchy& hierarchy, const Predictions& coarse,
                       const std::vector<std::optional<Predictions>>& subs) {
  const std::vector<int> super = predicted_classes(coarse);
  std::vector<std::vector<int>> within(subs.size());
  for (std::size_t s = 0; s < subs.size(); ++s)
    if (subs[s]) within[s] = predicted_classes(*subs[s]);
  std::vector<int> out(super.size());
  for (std::size_t i = 0; i < super.size(); ++i) {
    const auto s = static_cast<std::size_t>(super[i]);
    const auto& members = hierarchy.classes[s];
    out[i] =
        members.size() == 1 ? members.front() : members[static_cast<std::size_t>(within[s].at(i))];
  }
  return out;
}

std::int64_t parameter_count(const std::vector<LayerSpec>& layers, const Shape& input_shape,
                             int num_classes) {
  return Model(layers, input_shape, num_classes, 0).parameter_count();
}

std::vector<LayerSpec> widen_to(const std::vector<LayerSpec>& layers, const Shape& input_shape,
                                int num_classes, std::int64_t parameters) {
  std::size_t last = layers.size();
  for (std::size_t i = layers.size(); i-- > 0;)
    if (layers[i].kind == LayerKind::dense || layers[i].kind == LayerKind::conv2d) {
      last = i;
      break;
    }
  auto scaled = [&](double factor) {
    std::vector<LayerSpec> out = layers;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (i == last) continue;
      if (out[i].kind == LayerKind::dense)
        out[i].units = std::max(1, static_cast<int>(std::lround(out[i].units * factor)));
      if (out[i].kind == LayerKind::conv2d)
        out[i].filters = std::max(1, static_cast<int>(std::lround(out[i].filters * factor)));
    }
    return out;
  };
  // The count grows with the factor: bisect on it, then keep the closer of the two ends.
  double lo = 0.05, hi = 1.0;
  while (parameter_count(scaled(hi), input_shape, num_classes) < parameters && hi < 1024) hi *= 2;
  for (int i = 0; i < 40; ++i) {
    const double mid = 0.5 * (lo + hi);
    (parameter_count(scaled(mid), input_shape, num_classes) < parameters ? lo : hi) = mid;
  }
  const auto distance = [&](double f) {
    return std::llabs(parameter_count(scaled(f), input_shape, num_classes) - parameters);
  };
  return scaled(distance(lo) <= distance(hi) ? lo : hi);
}

}  // namespace strata
