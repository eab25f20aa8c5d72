// `strata sbatch CONFIG --nodes N`: a ready Slurm job script for CONFIG, sized with the planner.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/errors.hpp"
#include "jobs/commands.hpp"
#include "jobs/run_plan.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

// The project root: the strata binary lives in <root>/build/ (or another build directory).
fs::path project_root() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = exe.parent_path(); !ec && !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path())
    if (fs::exists(dir / "jobs/slurm/strata_step.sh")) return dir;
  throw ConfigError(
      "strata sbatch: cannot find jobs/slurm/strata_step.sh above the strata binary; run the "
      "binary from its build directory inside the strata checkout");
}

std::string commented(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    out += "# " + text.substr(start, end - start) + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

int sbatch_command(const SbatchOptions& o) {
  const Config config = load_config(o.config_path);
  const int ranks = o.nodes * o.ranks_per_node;
  // The plan the job will get, so that a script for an impossible layout is never printed.
  const Plan plan = plan_run(config, ranks, o.ranks_per_node);
  const fs::path root = project_root();
  const fs::path config_path = fs::absolute(o.config_path);
  std::string script = "#!/usr/bin/env bash\n";
  script += fmt::format("# strata job for {}, printed by `strata sbatch`. Submit it with sbatch.\n",
                        config_path.string());
  script += "# On exit 75 (checkpointed on the signal) it requeues itself and resumes.\n";
  script += fmt::format("#SBATCH --job-name={}\n", config.run.name);
  script += fmt::format("#SBATCH --nodes={}\n", o.nodes);
  script += fmt::format("#SBATCH --ntasks-per-node={}\n", o.ranks_per_node);
  if (!o.time.empty()) script += fmt::format("#SBATCH --time={}\n", o.time);
  if (!o.partition.empty()) script += fmt::format("#SBATCH --partition={}\n", o.partition);
  // Relative paths in the config (data, output.dir) resolve as they did where this was printed.
  script += fmt::format("#SBATCH --chdir={}\n", fs::current_path().string());
  script += "#SBATCH --requeue\n#SBATCH --open-mode=append\n";
  script +=
      fmt::format("#SBATCH --signal=B:{}@{}\n", config.checkpoint.signal_name, o.signal_margin_s);
  script += fmt::format("#SBATCH --output={}-%j.out\n", config.run.name);
  script += "#\n" + commented(describe(plan));
  script += fmt::format("exec {} run {}\n", (root / "jobs/slurm/strata_step.sh").string(),
                        config_path.string());
  fmt::print("{}", script);
  return exit_ok;
}

}  // namespace strata
