// The YAML tree of a config as a run sees it: the file's text with ${VAR} and ${VAR:-default}
// expanded from the environment and every `--set key.path=value` override applied.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace strata {

// Parses `text` (ConfigError at the line of malformed YAML), expands environment variables in
// every scalar (ConfigError at the scalar's line for an unset variable without a default, or a
// "${" without its "}"), then applies `overrides`, each "key.path=value" with list items as
// "layers[2]" and the value read as YAML ("3", "adam", "[0, 1]"). An override whose path runs
// through something that is not a map (or a list index out of range) is a ConfigError naming it.
YAML::Node load_config_tree(const std::string& text, const std::string& file,
                            const std::vector<std::string>& overrides);

// Rewrites a ConfigError message about a value an override set ("f.yaml:1:1: training.epochs:
// ...") to name the override instead of a line of the file ("--set training.epochs=x: ...");
// other messages, and those that list the overrides they depend on ("(with --set ...)"), come back
// unchanged.
std::string attribute_to_override(const std::string& message, const std::string& file,
                                  const std::vector<std::string>& overrides);

}  // namespace strata
