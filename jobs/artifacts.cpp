#include "jobs/artifacts.hpp"

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"

namespace strata {

const nlohmann::json& Artifacts::get(const std::string& name) const {
  const auto it = items_.find(name);
  if (it != items_.end()) return it->second;
  std::string known;
  for (const auto& [n, v] : items_) known += (known.empty() ? "" : ", ") + n;
  throw DataError(
      fmt::format("no artifact {} (published so far: {})", name, known.empty() ? "none" : known));
}

std::string Artifacts::summary() const {
  std::string text;
  for (const auto& [name, value] : items_) {
    std::string files;
    const auto add = [&files](const nlohmann::json& item) {
      for (const char* key : {"report", "config", "weights"})
        if (item.is_object() && item.contains(key) && item[key].is_string())
          files +=
              fmt::format("{}{} {}", files.empty() ? "" : ", ", key, item[key].get<std::string>());
    };
    add(value);
    const nlohmann::json* list = value.is_array() ? &value
                                 : value.is_object() && value.contains("members")
                                     ? &value["members"]
                                     : nullptr;
    if (list != nullptr && files.empty() && !list->empty()) {
      add(list->front());
      files += fmt::format(" (first of {})", list->size());
    }
    text += fmt::format("  {}: {}\n", name, files.empty() ? value.dump() : files);
  }
  return text;
}

void Artifacts::save_state(StateDict& out, const std::string& prefix) const {
  out.put_text(prefix + "/artifacts", nlohmann::json(items_).dump());
}

void Artifacts::load_state(const StateDict& in, const std::string& prefix) {
  items_.clear();
  if (!in.has_scalar(prefix + "/artifacts")) return;
  const auto all = nlohmann::json::parse(in.get_text(prefix + "/artifacts"), nullptr, false);
  if (all.is_discarded() || !all.is_object())
    throw DataError(fmt::format("{}/artifacts is not a JSON object", prefix));
  for (const auto& [name, value] : all.items()) items_[name] = value;
}

void Artifacts::write(const std::filesystem::path& file) const {
  write_text_atomically(file, nlohmann::json(items_).dump(2) + "\n");
}

void Artifacts::share(const Communicator& world, int root) {
  std::string text = nlohmann::json(items_).dump();
  world.broadcast_string(text, root);
  const auto all = nlohmann::json::parse(text);  // alive through the loop: items() refers to it
  items_.clear();
  for (const auto& [name, value] : all.items()) items_[name] = value;
}

}  // namespace strata
