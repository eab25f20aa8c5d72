// The config's hpo stage: its settings, its search space, and the "$name" references to that space.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config_reader.hpp"

namespace strata::config_reader {

HpoSpec parse_hpo(const MapReader& params);

// A "$name" scalar somewhere in the config, which a search parameter's value replaces.
struct Reference {
  std::string name;
  Reader at;
};

// Every "$name" scalar under `root` except in the stages section, which defines the names.
std::vector<Reference> find_references(const Reader& root);

// Fails at the first "$name" in the stages section, which no trial substitutes.
void reject_references(const Reader& stages);

// Replaces every "$name" scalar under `root` by values.at(name), in place. Callers load a fresh
// tree for each substitution: a copy made by YAML::Clone loses the line and column of every node.
void substitute(YAML::Node root, const std::map<std::string, std::string>& values);

}  // namespace strata::config_reader
