// The strata sub-commands; each returns the process exit code and throws strata errors for main to
// map.
#pragma once

#include <string>
#include <vector>

namespace strata {

struct RunOptions {
  std::string config_path;
  std::vector<std::string> overrides;  // --set key.path=value
  bool fresh = false;
  int threads = -1;      // -1: use run.threads from the config
  bool verbose = false;  // every member group's own progress lines too
};

int run_command(const RunOptions& options);
int predict_command(const std::string& config_path, const std::string& weights_path, int threads);
int import_idx_command(const std::string& dir, const std::string& out_path);
struct PlanOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  std::vector<int> ranks;  // one plan per count; --predict prints a table row per count
  int ranks_per_node = 0;  // 0: STRATA_RANKS_PER_NODE, else all ranks on one node
  // --predict: step time, samples/s and scaling efficiency from the cost model.
  bool predict = false;
  std::string calibration_path = "calibration.json";
  std::string network = "aries";  // a preset of parallel/collective_cost.hpp, or "local"
  int cores_per_node = 0;         // 0: the calibration's
  // Overrides of the network's figures; negative: the preset's (or the calibration's, intra-node).
  double intra_latency_us = -1, intra_gbs = -1, inter_latency_us = -1, inter_gbs = -1;
};

// Prints the decomposition for each rank count without starting them, and with `predict` the
// cost model's step time for each.
int plan_command(const PlanOptions& options);

struct CalibrateOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string out = "calibration.json";
  int steps = 200;
  int repeats = 3;
};

// Measures the config's step on this machine for `strata plan --predict` (jobs/calibration.hpp)
// and writes it as JSON; under mpiexec -n R it also times MPI_Allreduce between the R ranks.
int calibrate_command(const CalibrateOptions& options);

// Prints what a checkpoint file holds (stage, generation, epoch and step, the decomposition it was
// written on, tensors and bytes) after verifying every checksum; for a directory (a run's output
// directory), every checkpoint under it. Damage is a DataError for a file, exit code 3 for a
// directory.
int inspect_command(const std::string& path);

// Writes one self-contained HTML page (inline SVG) of what the run in `dir` wrote: curves per
// member, fitness per generation, the ensemble and transfer tables, the plan; into `out`, or
// dir/report.html when it is empty.
int report_command(const std::string& dir, const std::string& out);

struct SbatchOptions {
  std::string config_path;
  int nodes = 1;
  int ranks_per_node = 1;
  std::string time;       // --time, as Slurm takes it; empty: the partition's default
  std::string partition;  // empty: the default partition
  int signal_margin_s = 300;
};

// Prints a Slurm job script for the config on nodes x ranks_per_node ranks (planned first, so a
// layout that cannot work is a config error here, not in the queue), running it through
// jobs/slurm/strata_step.sh with requeue on exit 75.
int sbatch_command(const SbatchOptions& options);

// The thread count a rank uses: `requested` if positive, else the cores this process may run on.
int resolve_threads(int requested);

}  // namespace strata
