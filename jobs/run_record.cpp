#include "jobs/run_record.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/config_names.hpp"
#include "core/cpu_kernels.hpp"
#include "core/device.hpp"
#include "jobs/build_info.hpp"

namespace strata {

namespace {

// Variables that change what a run computes or how fast (kernel choice, threads, layout), and the
// Slurm job it ran in.
constexpr const char* recorded_environment[] = {
    "OMP_NUM_THREADS",      "OMP_WAIT_POLICY",       "OMP_PROC_BIND",
    "DNNL_MAX_CPU_ISA",     "ONEDNN_MAX_CPU_ISA",    "DNNL_DEFAULT_FPMATH_MODE",
    "CUDA_VISIBLE_DEVICES", "STRATA_RANKS_PER_NODE", "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",   "SLURM_ARRAY_TASK_ID",   "SLURM_RESTART_COUNT",
    "SLURM_NTASKS",         "SLURM_JOB_NODELIST"};

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<std::size_t>(length));
  return version.substr(0, version.find('\n'));
}

std::string hdf5_library() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return fmt::format("{}.{}.{}", major, minor, release);
}

nlohmann::json layer_json(const LayerSpec& l) {
  nlohmann::json j = {{"kind", to_string(l.kind)}, {"name", l.name}};
  switch (l.kind) {
    case LayerKind::dense:
      j.update({{"units", l.units}, {"init", to_string(l.init)}, {"split", to_string(l.split)}});
      break;
    case LayerKind::conv2d:
      j.update({{"filters", l.filters},
                {"kernel", l.kernel},
                {"stride", l.stride},
                {"padding", l.padding},
                {"init", to_string(l.init)},
                {"split", to_string(l.split)}});
      break;
    case LayerKind::maxpool2d:
    case LayerKind::avgpool2d:
      j.update({{"size", l.size}, {"stride", l.stride}});
      break;
    case LayerKind::dropout:
      j["rate"] = l.rate;
      break;
    case LayerKind::leaky_relu:
      j["alpha"] = l.alpha;
      break;
    default:
      break;
  }
  return j;
}

}  // namespace

nlohmann::json effective_config(const Config& c) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : c.layers) layers.push_back(layer_json(l));
  const auto& o = c.training.optimizer;
  const auto& s = c.training.schedule;
  const auto& p = c.parallel;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& stage : c.stages) stages.push_back(to_string(stage.kind()));
  return {{"run", {{"name", c.run.name}, {"seed", c.run.seed}, {"threads", c.run.threads}}},
          {"data",
           {{"source", to_string(c.data.source)},
            {"path", c.data.path},
            {"validation_fraction", c.data.validation_fraction},
            {"train_subset", c.data.train_subset},
            {"test_subset", c.data.test_subset},
            {"read", to_string(c.data.read)},
            {"images", c.data.names.images},
            {"labels", c.data.names.labels},
            {"classes", c.data.classes},
            {"samples_per_class", c.data.samples_per_class}}},
          {"model", c.objective ? nlohmann::json{{"objective", c.objective->name},
                                                 {"dims", c.objective->dims}}
                                : nlohmann::json{{"layers", layers}}},
          {"training",
           {{"epochs", c.training.epochs},
            {"local_batch", c.training.local_batch},
            {"optimizer",
             {{"type", to_string(o.kind)},
              {"lr", o.lr},
              {"momentum", o.momentum},
              {"nesterov", o.nesterov},
              {"weight_decay", o.weight_decay},
              {"beta1", o.beta1},
              {"beta2", o.beta2},
              {"eps", o.eps}}},
            {"schedule",
             {{"type", to_string(s.kind)},
              {"warmup_epochs", s.warmup_epochs},
              {"step_epochs", s.step_epochs},
              {"gamma", s.gamma},
              {"min_lr", s.min_lr}}}}},
          {"parallel",
           {{"max_global_batch", p.max_global_batch},
            {"model", p.model},
            {"data", p.data},
            {"memory_per_rank_mib", p.memory_per_rank_mib},
            {"bucket_mib", p.bucket_mib},
            {"lr_scaling", to_string(p.lr_scaling)},
            {"accumulate", p.accumulate},
            {"watchdog_s", p.watchdog_s},
            {"layout", to_string(p.layout)}}},
          {"output", {{"dir", c.output.dir}, {"progress_seconds", c.output.progress_seconds}}},
          {"checkpoint",
           {{"every_steps", c.checkpoint.every_steps},
            {"every_seconds", c.checkpoint.every_seconds},
            {"keep", c.checkpoint.keep},
            {"signal", c.checkpoint.signal_name}}},
          {"stages", stages}};
}

RunRecord::RunRecord(const Config& config, const Communicator& world, std::filesystem::path path,
                     const std::string& plans)
    : path_(std::move(path)) {
  char host[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(host, &length);
  const auto hosts = world.allgather_strings(std::string(host, static_cast<std::size_t>(length)));
  const DeviceReport devices = detect_devices();
  const auto gpus = world.allgather_strings(std::to_string(devices.cuda_devices));
  if (world.rank() != 0) return;
  // Ranks per host, in the order the hosts first appear.
  nlohmann::json per_host = nlohmann::json::array();
  std::map<std::string, std::size_t> index;
  for (const auto& h : hosts) {
    if (!index.contains(h)) {
      index[h] = per_host.size();
      per_host.push_back({{"host", h}, {"ranks", 0}, {"gpus", 0}});
    }
    per_host[index[h]]["ranks"] = per_host[index[h]]["ranks"].get<int>() + 1;
  }
  // The GPUs the CUDA runtime shows each host's ranks (0 without CUDA or a GPU).
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    auto& entry = per_host[index[hosts[r]]];
    entry["gpus"] = std::max(entry["gpus"].get<int>(), std::stoi(gpus[r]));
  }
  nlohmann::json environment = nlohmann::json::object();
  for (const char* name : recorded_environment) {
    const char* value = std::getenv(name);
    environment[name] = value != nullptr ? nlohmann::json(value) : nlohmann::json(nullptr);
  }
  const KernelReport kernels = kernel_report();
  const BuildInfo& build = build_info();
  nlohmann::json allocations = nlohmann::json::array();
  if (std::ifstream in(path_); in) {
    const auto earlier = nlohmann::json::parse(in, nullptr, false);
    if (!earlier.is_discarded() && earlier.contains("allocations"))
      allocations = earlier["allocations"];
  }
  std::error_code ec;
  const auto working_directory = std::filesystem::current_path(ec);
  allocations.push_back({{"started", now_utc()},
                         {"working_directory", working_directory.string()},
                         {"ended", nullptr},
                         {"exit_status", nullptr},
                         {"world_size", world.size()},
                         {"hosts", per_host},
                         {"plan", plans},
                         // What may differ from one allocation to the next of the same run.
                         {"git_revision", build.git_revision},
                         {"kernels",
                          {{"onednn_isa", kernels.onednn_isa},
                           {"cpu", kernels.cpu_best},
                           {"warning", kernels.warning},
                           {"device", devices.summary},
                           {"device_detail", devices.detail},
                           {"run_device", to_string(config.run.device)}}},
                         {"environment", environment}});
  record_ = {
      {"strata", {{"version", build.version}, {"git_revision", build.git_revision}}},
      {"build",
       {{"compiler", build.compiler}, {"flags", build.flags}, {"build_type", build.build_type}}},
      {"libraries",
       {{"mpi", mpi_library()}, {"hdf5", hdf5_library()}, {"onednn", kernels.onednn_version}}},
      {"config",
       {{"file", config.file},
        {"overrides", config.overrides},
        {"as_given", config.text},
        {"resolved", config.resolved_text},
        {"effective", effective_config(config)}}},
      {"allocations", allocations}};
  write();
}

void RunRecord::finish(int exit_status, const std::string& message) noexcept {
  if (path_.empty() || record_.is_null()) return;
  // Called on the way out of an error too: a failure here must not replace the run's own.
  try {
    auto& now = record_["allocations"].back();
    now["ended"] = now_utc();
    now["exit_status"] = exit_status;
    if (!message.empty()) now["error"] = message;
    write();
  } catch (const std::exception& e) {
    fmt::print(stderr, "strata: warning: cannot complete {}: {}\n", path_.string(), e.what());
  }
}

void RunRecord::write() const {
  // Environment values and messages are bytes: what is not UTF-8 becomes U+FFFD, not an error.
  write_text_atomically(
      path_, record_.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace strata
