// The CPU-list parser and the L3 lookup over a sysfs-shaped tree and over this machine's own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cpu_caches.hpp"
#include "tests/core/temp_dir.hpp"

namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

// cpu<N>/cache/index<K>/{level,shared_cpu_list} as Linux lays them out.
void add_cache(const std::filesystem::path& root, int cpu, int index, int level,
               const std::string& shared) {
  const auto dir =
      root / ("cpu" + std::to_string(cpu)) / "cache" / ("index" + std::to_string(index));
  write_file(dir / "level", std::to_string(level));
  write_file(dir / "shared_cpu_list", shared);
}

}  // namespace

TEST_CASE("a CPU list reads as the kernel writes it", "[cpu_caches]") {
  CHECK(strata::parse_cpu_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(strata::parse_cpu_list("5") == std::vector<int>{5});
  CHECK(strata::parse_cpu_list("").empty());
  CHECK_THROWS_AS(strata::parse_cpu_list("0-"), std::invalid_argument);
  CHECK_THROWS_AS(strata::parse_cpu_list("3-1"), std::invalid_argument);
  CHECK_THROWS_AS(strata::parse_cpu_list("0,,2"), std::invalid_argument);
  CHECK_THROWS_AS(strata::parse_cpu_list("a"), std::invalid_argument);
}

TEST_CASE("the L3 caches of a set of CPUs are told apart by what shares them", "[cpu_caches]") {
  const strata::testing::TempDir root;
  // Two L3s of two cores each; every core has its own L2 (index2), which must not count.
  for (int cpu = 0; cpu < 4; ++cpu) {
    add_cache(root.str(), cpu, 2, 2, std::to_string(cpu));
    add_cache(root.str(), cpu, 3, 3, cpu < 2 ? "0-1" : "2-3");
  }
  CHECK(strata::l3_caches({0, 1}, root.str()) == std::vector<std::string>{"0-1"});
  CHECK(strata::l3_caches({1, 2}, root.str()) == std::vector<std::string>{"0-1", "2-3"});
  CHECK(strata::l3_caches({0, 1, 2, 3}, root.str()) == std::vector<std::string>{"0-1", "2-3"});
  CHECK(strata::l3_caches({7}, root.str()).empty());  // no such CPU in the tree
}

TEST_CASE("this process may run somewhere, and its L3s cover those CPUs", "[cpu_caches]") {
  const std::vector<int> cpus = strata::allowed_cpus();
  REQUIRE_FALSE(cpus.empty());
  // Each L3's list names CPUs that exist; together they hold every allowed CPU (on machines that
  // report an L3 at all).
  const auto caches = strata::l3_caches(cpus);
  if (caches.empty()) return;
  std::vector<int> covered;
  for (const auto& list : caches)
    for (int cpu : strata::parse_cpu_list(list)) covered.push_back(cpu);
  for (int cpu : cpus) CHECK(std::find(covered.begin(), covered.end(), cpu) != covered.end());
}
