// The strata binary: parses the command line, runs one sub-command, maps errors to exit codes.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/config_tree.hpp"
#include "core/dataset.hpp"
#include "core/errors.hpp"
#include "jobs/build_info.hpp"
#include "jobs/commands.hpp"
#include "jobs/mpi_environment.hpp"
#include "parallel/collective_cost.hpp"

namespace strata {

int import_idx_command(const std::string& dir, const std::string& out_path) {
  const auto parent = std::filesystem::path(out_path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw DataError(fmt::format("cannot create directory {}: {}", parent.string(), ec.message()));
  import_idx(dir, out_path);
  fmt::print("wrote {} from the IDX files in {}\n", out_path, dir);
  return 0;
}

}  // namespace strata

namespace {

// Whether an MPI launcher (mpiexec, srun) started this process: the PMI/PMIx variables each of
// them sets for its ranks. A process started by hand has none of them.
bool started_by_launcher() {
  for (const char* name :
       {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "PALS_RANKID"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

int dispatch(int argc, char** argv, std::optional<strata::MpiEnvironment>& mpi) {
  CLI::App app{
      "strata: batch deep-learning jobs on supercomputers. One MPI binary, configured in YAML.\n"
      "Exit codes: 0 done, 2 usage or config error, 3 data, weights or checkpoint error, 75 "
      "stopped by a signal after a checkpoint (requeue to resume), 1 internal error, diverged "
      "training or a search in which every trial failed.\n"
      "Paths in a config: data.path and a transfer's pretrained file are read relative to the "
      "config file's directory; output.dir is relative to the working directory."};
  const strata::BuildInfo& build = strata::build_info();
  app.set_version_flag("--version",
                       fmt::format("strata {} ({}; {}, {})", build.version, build.git_revision,
                                   build.compiler, build.build_type));
  app.require_subcommand(1);

  strata::RunOptions run;
  auto* run_cmd = app.add_subcommand(
      "run",
      "Run the stages of CONFIG (default: one train stage); under mpiexec -n N the "
      "ranks split into member groups as `strata plan` shows");
  run_cmd
      ->add_option("config", run.config_path,
                   "YAML run configuration (its relative data paths are read from its directory, "
                   "output.dir from the working directory)")
      ->required();
  run_cmd->add_flag("--fresh", run.fresh,
                    "Start over when output.dir already holds a run; the earlier run is moved "
                    "aside, not deleted");
  run_cmd->add_flag("--verbose", run.verbose,
                    "Every member group prints its own progress lines, prefixed [g<n>] (they go to "
                    "each member's log.txt anyway); by default only rank 0 prints, one line per "
                    "interval for the whole stage");
  run_cmd->add_option(
      "--threads", run.threads,
      "Worker threads per rank (overrides run.threads; 0 = this rank's share of the node's cores)");
  run_cmd->add_option("--set", run.overrides,
                      "Override a config value, checked as the file's: --set training.epochs=3 "
                      "--set model.layers[1].dense.units=64 (repeatable; after ${VAR} expansion, "
                      "which every config value gets: ${VAR} or ${VAR:-default})");

  std::string predict_config, weights;
  int predict_threads = -1;
  auto* predict_cmd = app.add_subcommand(
      "predict",
      "Report the test accuracy of WEIGHTS.h5 on CONFIG's data and model, or of an ensemble "
      "(its ensemble_report.json, or the directory holding it) by each combiner");
  predict_cmd
      ->add_option("config", predict_config, "YAML configuration naming the data and the model")
      ->required();
  predict_cmd
      ->add_option("weights", weights,
                   "HDF5 weights file (/weights/<layer>/weight, .../bias), or an ensemble's "
                   "ensemble_report.json or its directory")
      ->required();
  predict_cmd->add_option("--threads", predict_threads,
                          "Worker threads (default: the config's run.threads; 0 = all cores)");

  strata::PlanOptions plan;
  auto* plan_cmd = app.add_subcommand(
      "plan",
      "Print how N ranks would split into member groups, data replicas and model shards for "
      "CONFIG, and why; with --predict, the step time, samples/s and scaling efficiency the cost "
      "model gives from a calibration (strata calibrate). Starts no ranks");
  plan_cmd->add_option("config", plan.config_path, "YAML run configuration")->required();
  plan_cmd->add_option("--set", plan.overrides, "Override a config value, as strata run --set");
  plan_cmd
      ->add_option("--ranks", plan.ranks,
                   "Number of MPI ranks of the job; several (--ranks 1,2,4) print one plan each, "
                   "or with --predict one table row each")
      ->required()
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 24));
  plan_cmd
      ->add_option("--ranks-per-node", plan.ranks_per_node,
                   "Ranks per node (default: STRATA_RANKS_PER_NODE, else all on one node)")
      ->check(CLI::Range(1, 1 << 24));
  plan_cmd->add_flag("--predict", plan.predict,
                     "Predict each plan's optimizer step (compute, model- and data-parallel "
                     "communication), samples/s and speedup over one rank on one node");
  plan_cmd->add_option("--calibration", plan.calibration_path,
                       "The JSON strata calibrate wrote (default calibration.json)");
  std::vector<std::string> networks = strata::network_preset_names();
  networks.push_back("local");  // the calibration's own figures
  plan_cmd
      ->add_option("--network", plan.network,
                   "aries, slingshot (presets in docs/cost_model.md), or local: the "
                   "calibration's own MPI figures, all ranks on one node (default aries)")
      ->check(CLI::IsMember(networks));
  plan_cmd
      ->add_option("--cores-per-node", plan.cores_per_node,
                   "Cores of a node (default: the calibrated machine's)")
      ->check(CLI::Range(1, 1 << 16));
  plan_cmd->add_option("--intra-latency-us", plan.intra_latency_us,
                       "Latency between ranks of a node, microseconds (overrides the network's)");
  plan_cmd->add_option("--intra-gbs", plan.intra_gbs,
                       "Bandwidth between ranks of a node, GB/s (overrides the network's)");
  plan_cmd->add_option("--inter-latency-us", plan.inter_latency_us,
                       "Latency between nodes, microseconds (overrides the network's)");
  plan_cmd->add_option("--inter-gbs", plan.inter_gbs,
                       "Bandwidth of a node's network link, GB/s (overrides the network's)");

  strata::CalibrateOptions calibrate;
  auto* calibrate_cmd = app.add_subcommand(
      "calibrate",
      "Time CONFIG's model on this machine (each layer's forward and backward, data reads, the "
      "optimizer, whole steps on 1..all cores; under mpiexec -n R on one node also "
      "MPI_Allreduce between the R ranks and steps with all R training at once, as independent "
      "members, pairs of replicas and pairs of shards, and how their single steps spread: "
      "launch as many ranks per node as the job will) and write the JSON strata plan --predict "
      "reads");
  calibrate_cmd->add_option("config", calibrate.config_path, "YAML run configuration")->required();
  calibrate_cmd->add_option("--set", calibrate.overrides,
                            "Override a config value, as strata run --set");
  calibrate_cmd->add_option("--out", calibrate.out,
                            "JSON file to write (default calibration.json)");
  calibrate_cmd
      ->add_option("--steps", calibrate.steps, "Optimizer steps per timed epoch (default 200)")
      ->check(CLI::Range(2, 1 << 20));
  calibrate_cmd
      ->add_option("--repeats", calibrate.repeats,
                   "Timed epochs per thread count, the median counts (default 3)")
      ->check(CLI::Range(1, 1000));

  std::string inspect_path;
  auto* inspect_cmd = app.add_subcommand(
      "inspect",
      "Show what a checkpoint holds (stage, generation, epoch and step, the decomposition it was "
      "written on, tensors) and verify its checksums; exit 3 if any is damaged");
  inspect_cmd
      ->add_option("checkpoint", inspect_path,
                   "A checkpoint file (ckpt-*.h5), or a run's output directory for all of them")
      ->required();

  strata::SbatchOptions sbatch;
  auto* sbatch_cmd = app.add_subcommand(
      "sbatch",
      "Print a Slurm job script for CONFIG on --nodes N: sized with the planner, requeued from "
      "its checkpoint on exit 75 (pipe it to sbatch)");
  sbatch_cmd->add_option("config", sbatch.config_path, "YAML run configuration")->required();
  sbatch_cmd->add_option("--nodes", sbatch.nodes, "Nodes of the job")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  sbatch_cmd
      ->add_option("--ranks-per-node", sbatch.ranks_per_node, "MPI ranks per node (default 1)")
      ->check(CLI::Range(1, 4096));
  sbatch_cmd->add_option("--time", sbatch.time,
                         "Time limit, as sbatch --time takes it (e.g. 2:00:00)");
  sbatch_cmd->add_option("--partition", sbatch.partition, "Slurm partition");
  sbatch_cmd
      ->add_option("--signal-margin", sbatch.signal_margin_s,
                   "Seconds before the time limit at which Slurm sends the requeue signal "
                   "(default 300)")
      ->check(CLI::Range(10, 86400));

  std::string report_dir, report_out;
  auto* report_cmd = app.add_subcommand(
      "report",
      "Write one self-contained HTML page (no network needed) of a run: each training's loss per "
      "step and accuracy per epoch, fitness per generation, the ensemble and transfer tables, "
      "the plan");
  report_cmd->add_option("dir", report_dir, "The run's output.dir")->required();
  report_cmd->add_option("--out", report_out, "HTML file to write (default: DIR/report.html)");

  std::string idx_dir, idx_out;
  auto* data_cmd = app.add_subcommand("data", "Dataset tools");
  data_cmd->require_subcommand(1);
  auto* import_cmd = data_cmd->add_subcommand(
      "import-idx", "Convert gzipped IDX files (Fashion-MNIST, MNIST) to HDF5");
  import_cmd
      ->add_option("dir", idx_dir,
                   "Directory with train-images-idx3-ubyte.gz and the other three files")
      ->required();
  import_cmd->add_option("out", idx_out, "HDF5 file to write")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : strata::exit_usage;
  }
  // run and calibrate are MPI programs. The tools run without MPI, as on a login node where
  // MPI_Init fails outside a job step; under a launcher they start it to see how many ranks
  // were started.
  if (*run_cmd || *calibrate_cmd || started_by_launcher()) mpi.emplace(argc, argv);
  const int world_size = mpi ? mpi->size() : 1;
  if (world_size > 1 &&
      (*predict_cmd || *import_cmd || *inspect_cmd || *sbatch_cmd || *report_cmd)) {
    throw strata::ConfigError(
        fmt::format("strata {} runs on one rank, but was started on {}; start it without mpiexec "
                    "or with mpiexec -n 1",
                    *predict_cmd   ? "predict"
                    : *inspect_cmd ? "inspect"
                    : *sbatch_cmd  ? "sbatch"
                    : *report_cmd  ? "report"
                                   : "data import-idx",
                    world_size));
  }
  // A config error in a value that --set gave, wherever it is found (parsing, the stages' checks,
  // a stage as it starts), is named by the override rather than by a place in the file.
  const auto naming_overrides = [](const std::string& file,
                                   const std::vector<std::string>& overrides, auto&& command) {
    try {
      return command();
    } catch (const strata::ConfigError& e) {
      throw strata::ConfigError(strata::attribute_to_override(e.what(), file, overrides));
    }
  };
  if (*run_cmd)
    return naming_overrides(run.config_path, run.overrides,
                            [&] { return strata::run_command(run); });
  if (*predict_cmd) return strata::predict_command(predict_config, weights, predict_threads);
  if (*import_cmd) return strata::import_idx_command(idx_dir, idx_out);
  if (*plan_cmd)
    return naming_overrides(plan.config_path, plan.overrides,
                            [&] { return strata::plan_command(plan); });
  if (*calibrate_cmd)
    return naming_overrides(calibrate.config_path, calibrate.overrides,
                            [&] { return strata::calibrate_command(calibrate); });
  if (*inspect_cmd) return strata::inspect_command(inspect_path);
  if (*sbatch_cmd) return strata::sbatch_command(sbatch);
  if (*report_cmd) return strata::report_command(report_dir, report_out);
  return strata::exit_usage;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<strata::MpiEnvironment> mpi;
  int code = strata::exit_ok;
  std::string kind, message;
  try {
    code = dispatch(argc, argv, mpi);
  } catch (const strata::ConfigError& e) {
    std::tie(code, kind, message) = std::tuple(strata::exit_usage, "config error", e.what());
  } catch (const strata::DataError& e) {
    std::tie(code, kind, message) = std::tuple(strata::exit_data, "data error", e.what());
  } catch (const strata::SearchFailed& e) {
    // Every rank throws it alike, after the search's last collective: one line, no abort.
    if (!mpi || mpi->rank() == 0) fmt::print(stderr, "strata: search failed: {}\n", e.what());
    return strata::exit_internal;
  } catch (const std::exception& e) {
    std::tie(code, kind, message) = std::tuple(strata::exit_internal, "error", e.what());
  }
  std::fflush(stdout);
  if (message.empty()) return code;
  if (!mpi || mpi->size() == 1) {
    fmt::print(stderr, "strata: {}: {}\n", kind, message);
    return code;
  }
  // Other ranks may be waiting in a collective for this one: end the whole job rather than hang it.
  fmt::print(stderr, "strata: rank {}: {}: {}\n", mpi->rank(), kind, message);
  std::fflush(stderr);
  // MPI_Abort makes the launcher kill every process at once, and mpiexec can exit before it has
  // forwarded the message just written (seen under load): give the launcher a moment to pass it on.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  MPI_Abort(MPI_COMM_WORLD, code);
  return code;
}
