#include "jobs/progress_lines.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace strata {

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(std::lround(std::max(seconds, 0.0)));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string describe_running(std::span<const TrialInFlight> running,
                             const std::function<std::string(int trial_id)>& name) {
  if (running.empty()) return "none running";
  std::vector<TrialInFlight> longest(running.begin(), running.end());
  std::stable_sort(
      longest.begin(), longest.end(),
      [](const TrialInFlight& a, const TrialInFlight& b) { return a.seconds > b.seconds; });
  constexpr std::size_t named = 3;
  std::string text = fmt::format("{} running: ", running.size());
  for (std::size_t i = 0; i < std::min(named, longest.size()); ++i)
    text += fmt::format("{}{} on group {} for {}", i == 0 ? "" : ", ", name(longest[i].trial_id),
                        longest[i].group, format_duration(longest[i].seconds));
  if (longest.size() > named) text += fmt::format(" and {} more", longest.size() - named);
  return text;
}

}  // namespace strata
