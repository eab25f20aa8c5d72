#include "hpo/journal_rows.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

std::ofstream open_for_rows(const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::out | std::ios::app);
  if (!out) throw DataError(fmt::format("cannot write {}", path.string()));
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

nlohmann::json param_value(const ParamSpec& spec, double gene) {
  const std::string text = describe_value(spec, gene);
  if (spec.kind == ParamKind::integer) return static_cast<long long>(std::llround(gene));
  if (spec.kind != ParamKind::choice) return gene;
  const auto parsed = nlohmann::json::parse(text, nullptr, false);
  return !parsed.is_discarded() && parsed.is_number() ? parsed : nlohmann::json(text);
}

std::string param_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return fmt::format("{}", value.get<long long>());
  if (value.is_number()) return fmt::format("{}", value.get<double>());
  return value.dump();
}

nlohmann::json params_of(const SearchSpace& space, const Genome& genome) {
  nlohmann::json params = nlohmann::json::object();
  for (std::size_t k = 0; k < space.params.size(); ++k)
    params[space.params[k].name] = param_value(space.params[k], genome[k]);
  return params;
}

std::vector<nlohmann::json> complete_rows(const std::filesystem::path& path,
                                          bool (*complete)(const nlohmann::json& row)) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // no newline: the write was cut short
    auto row = nlohmann::json::parse(line, nullptr, false);
    // A row this version did not write (or a damaged one) ends the journal there.
    if (row.is_discarded() || !row.is_object() || !complete(row)) break;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace strata
