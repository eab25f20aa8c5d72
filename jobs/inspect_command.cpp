// `strata inspect CKPT`: what a checkpoint holds and whether it is intact; given a run's output
// directory, every checkpoint in it.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/checkpoint_file.hpp"
#include "core/errors.hpp"
#include "jobs/checkpoint_store.hpp"
#include "jobs/commands.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

std::string scalar_or(const StateDict& s, const std::string& key, const std::string& fallback) {
  if (!s.has_scalar(key)) return fallback;
  const auto& v = s.scalars().at(key);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  return std::get<std::string>(v);
}

// One line: what the checkpoint belongs to and where it stands.
std::string summary_line(const StateDict& s) {
  const std::string kind = scalar_or(s, "meta/kind", "?");
  if (kind == "run") {
    const std::int64_t stage = s.get_int("run/stage"), stages = s.get_int("run/stages");
    return fmt::format("run: {} (member groups of the first allocation: {})",
                       stage >= stages ? fmt::format("finished, all {} stage(s) done", stages)
                                       : fmt::format("in stage {} of {}", stage + 1, stages),
                       scalar_or(s, "run/first_groups", "?"));
  }
  if (kind == "search")
    return fmt::format("search of stage {}: {} results, {} generations complete",
                       scalar_or(s, "meta/stage", "?"), s.get_int("search/reported"),
                       scalar_or(s, "meta/generation", "?"));
  const std::string who =
      kind == "trial" ? fmt::format("trial {} (generation {})", scalar_or(s, "meta/trial", "?"),
                                    scalar_or(s, "meta/generation", "?"))
                      : fmt::format("member {}", scalar_or(s, "meta/member", "?"));
  const std::int64_t epoch = s.get_int("meta/epoch"), epochs = s.get_int("meta/epochs");
  const std::string where = epoch > epochs ? fmt::format("training complete ({} epochs)", epochs)
                                           : fmt::format("epoch {}/{} step {}", epoch, epochs,
                                                         s.get_int("meta/epoch_step"));
  return fmt::format(
      "stage {} {}: {}, global step {}; written on G {} x D {} x M {}, K {}, {} thread(s), global "
      "batch {}",
      scalar_or(s, "meta/stage", "?"), who, where, s.get_int("meta/global_step"),
      s.get_int("meta/groups"), s.get_int("meta/data"), s.get_int("meta/model"),
      s.get_int("meta/accumulate"), s.get_int("meta/threads"), s.get_int("meta/global_batch"));
}

void print_file(const fs::path& path) {
  const StateDict s = read_checkpoint(path.string());
  std::size_t bytes = 0;
  for (const auto& [key, t] : s.tensors()) bytes += t.values.size() * sizeof(float);
  fmt::print(
      "{}\n  {}\n  {} tensors, {:.2f} MiB; {} values; format {} version {}; every checksum "
      "holds\n",
      path.string(), summary_line(s), s.tensors().size(), static_cast<double>(bytes) / (1 << 20),
      s.scalars().size(), checkpoint_format, checkpoint_format_version);
  std::vector<std::pair<std::size_t, std::string>> largest;
  for (const auto& [key, t] : s.tensors()) largest.emplace_back(t.values.size(), key);
  std::sort(largest.rbegin(), largest.rend());
  for (std::size_t i = 0; i < std::min<std::size_t>(largest.size(), 8); ++i)
    fmt::print("  {:<48} {}\n", largest[i].second,
               shape_string(s.tensor(largest[i].second).local_shape));
  if (largest.size() > 8) fmt::print("  ... and {} more tensors\n", largest.size() - 8);
}

// Every checkpoint under `dir`, one line each; returns how many are damaged.
int print_directory(const fs::path& dir) {
  std::vector<fs::path> stores;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_directory() && !CheckpointStore(entry.path(), 2).list().empty())
      stores.push_back(entry.path());
  std::sort(stores.begin(), stores.end());
  if (stores.empty()) throw DataError(fmt::format("{}: no checkpoints found", dir.string()));
  int damaged = 0;
  for (const auto& store : stores) {
    fmt::print("{}\n", fs::relative(store, dir).string());
    for (const auto& file : CheckpointStore(store, 2).list()) {
      try {
        fmt::print("  {}  {}\n", file.filename().string(), summary_line(read_checkpoint(file)));
      } catch (const DataError& e) {
        ++damaged;
        fmt::print("  {}  DAMAGED: {}\n", file.filename().string(), e.what());
      }
    }
  }
  return damaged;
}

}  // namespace

int inspect_command(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw DataError(fmt::format("{}: no such file or directory", path));
  if (!fs::is_directory(path, ec)) {
    print_file(path);
    return exit_ok;
  }
  const int damaged = print_directory(path);
  if (damaged == 0) return exit_ok;
  fmt::print(stderr, "strata: {} damaged checkpoint(s) under {}\n", damaged, path);
  return exit_data;
}

}  // namespace strata
