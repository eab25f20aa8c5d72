// Small pieces of measuring shared by strata calibrate and the benchmarks: the median of repeated
// timings, and the name of the CPU they ran on.
#pragma once

#include <string>
#include <vector>

namespace strata {

// The median (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

// /proc/cpuinfo's first "model name", or "unknown CPU".
std::string cpu_model_name();

}  // namespace strata
