#include "core/cpu_caches.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace strata {

namespace {

int parse_cpu(std::string_view text, std::string_view list) {
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
    throw std::invalid_argument("not a CPU list: '" + std::string(list) + "'");
  return value;
}

// The file's first line without its newline; empty if it cannot be read.
std::string first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view list) {
  std::vector<int> cpus;
  while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) list.remove_suffix(1);
  if (list.empty()) return cpus;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    const int first = parse_cpu(item.substr(0, dash), list);
    const int last =
        dash == std::string_view::npos ? first : parse_cpu(item.substr(dash + 1), list);
    if (last < first) throw std::invalid_argument("not a CPU list: '" + std::string(list) + "'");
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    start = comma + 1;
  }
  return cpus;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

std::vector<std::string> l3_caches(const std::vector<int>& cpus,
                                   const std::filesystem::path& cpu_root) {
  std::vector<std::string> caches;
  for (int cpu : cpus) {
    const auto cache_dir = cpu_root / ("cpu" + std::to_string(cpu)) / "cache";
    // Every step takes an error code: only rank 0 asks, and a throw there would leave the other
    // ranks in the next collective.
    std::error_code error;
    for (std::filesystem::directory_iterator index(cache_dir, error), end; !error && index != end;
         index.increment(error)) {
      const auto& dir = index->path();
      if (dir.filename().string().rfind("index", 0) != 0) continue;
      if (first_line(dir / "level") != "3") continue;
      const std::string shared = first_line(dir / "shared_cpu_list");
      if (!shared.empty() && std::find(caches.begin(), caches.end(), shared) == caches.end())
        caches.push_back(shared);
    }
  }
  return caches;
}

}  // namespace strata
