// Which L3 caches the cores this process may run on belong to, as Linux's sysfs reports them.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}, the kernel's CPU-list format. Throws
// std::invalid_argument on anything else.
std::vector<int> parse_cpu_list(std::string_view list);

// The CPUs this process's affinity mask allows; empty if the kernel does not say.
std::vector<int> allowed_cpus();

// The distinct L3 caches among `cpus`, each named by the CPU list that shares it (its sysfs
// shared_cpu_list), in order of first appearance; empty where sysfs has no level-3 cache for them.
// Worker threads on cores of different L3s pass every step's weights and gradients between them.
std::vector<std::string> l3_caches(
    const std::vector<int>& cpus,
    const std::filesystem::path& cpu_root = "/sys/devices/system/cpu");

}  // namespace strata
