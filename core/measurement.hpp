// Small pieces of measuring shared by strata calibrate and the benchmarks: the median and the
// spread of repeated timings, and the name of the CPU they ran on.
#pragma once

#include <string>
#include <vector>

namespace strata {

// The median (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

// The arithmetic mean; 0 for none.
double mean(const std::vector<double>& values);

// `count` quantiles of `values`, ascending, at the middles of `count` equal slices of
// probability ((i + 0.5) / count), linearly interpolated between the sorted values: a summary of a
// distribution whose points each stand for an equal share of it. Empty for no values.
std::vector<double> quantiles(std::vector<double> values, int count);

// /proc/cpuinfo's first "model name", or "unknown CPU".
std::string cpu_model_name();

}  // namespace strata
