// What every search journal's rows share: parameter values as JSON and CSV fields, numbers that
// may be NaN, and files opened for appending rows.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "hpo/search_space.hpp"

namespace strata {

std::ofstream open_for_rows(const std::filesystem::path& path);

// A CSV field, quoted when it could break a row.
std::string csv_field(const std::string& text);

// JSON has no NaN: a failed trial's numbers are null.
nlohmann::json number_or_null(double value);

// A parameter's value as JSON: a number for reals and integers, and for a choice whose value is
// a number ("32"); otherwise the choice's text.
nlohmann::json param_value(const ParamSpec& spec, double gene);
// The CSV text of a JSON parameter value, as describe_value writes it.
std::string param_text(const nlohmann::json& value);
// Every parameter's value, by name.
nlohmann::json params_of(const SearchSpace& space, const Genome& genome);

// The complete JSON rows of a journal, in order; reading stops at the first line cut short by a
// kill or that `complete` rejects.
std::vector<nlohmann::json> complete_rows(const std::filesystem::path& path,
                                          bool (*complete)(const nlohmann::json& row));

}  // namespace strata
