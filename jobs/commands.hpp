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
// Prints the decomposition for `ranks` ranks without starting them; ranks_per_node 0: one node.
int plan_command(const std::string& config_path, int ranks, int ranks_per_node,
                 const std::vector<std::string>& overrides = {});

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

// Formats seconds as "1h02m", "3m12s" or "42s" for progress lines.
std::string format_duration(double seconds);
// The thread count a rank uses: `requested` if positive, else the cores this process may run on.
int resolve_threads(int requested);

}  // namespace strata
