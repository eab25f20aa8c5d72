#include "core/measurement.hpp"

#include <algorithm>
#include <fstream>
#include <numeric>

namespace strata {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

std::vector<double> quantiles(std::vector<double> values, int count) {
  std::vector<double> out;
  if (values.empty() || count < 1) return out;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  for (int i = 0; i < count; ++i) {
    // Value k sits at probability (k + 0.5) / n, as quantile i does at (i + 0.5) / count.
    const double at = std::clamp((i + 0.5) / count * n - 0.5, 0.0, n - 1.0);
    const auto below = static_cast<std::size_t>(at);
    const std::size_t above = std::min(below + 1, values.size() - 1);
    const double weight = at - static_cast<double>(below);
    out.push_back((1.0 - weight) * values[below] + weight * values[above]);
  }
  return out;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

}  // namespace strata
