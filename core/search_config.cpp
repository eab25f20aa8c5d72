#include "core/search_config.hpp"

#include "core/config_names.hpp"
#include "core/config_tree.hpp"

#include <cmath>
#include <filesystem>
#include <set>

namespace strata::config_reader {

namespace {

// "lr: {log_uniform: [1.0e-4, 0.1]}" or "optimizer: {choice: [sgd, adam]}".
ParamSpec parse_param(const std::string& name, const Reader& at) {
  const MapReader entry(at);
  if (entry.size() != 1)
    at.fail(
        "expected one parameter type and its range, e.g. {log_uniform: [1.0e-4, 0.1]} or {choice: "
        "[sgd, adam]}");
  const auto [kind_at, range_at] = entry.first_entry();
  ParamSpec p;
  p.name = name;
  p.mark = at.mark();
  p.kind = at.with(kind_at.node(), at.path(), kind_at.mark())
               .as_choice(EnumNames<ParamKind>::choices, "parameter type");
  const YAML::Node& list = range_at.node();
  if (!list.IsSequence()) range_at.fail(fmt::format("expected a list, got {}", range_at.found()));
  if (p.kind == ParamKind::choice) {
    if (list.size() == 0) range_at.fail("expected at least one choice");
    std::set<std::string> seen;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string value = range_at.item(i, list[i]).as_string();
      if (!seen.insert(value).second)
        range_at.item(i, list[i]).fail(fmt::format("'{}' is listed twice", value));
      p.choices.push_back(value);
    }
    return p;
  }
  if (list.size() != 2) range_at.fail(fmt::format("expected [lo, hi], got {} values", list.size()));
  if (p.kind == ParamKind::integer) {
    p.lo = range_at.item(0, list[0]).as_int({std::numeric_limits<int>::min()});
    p.hi = range_at.item(1, list[1]).as_int({std::numeric_limits<int>::min()});
  } else {
    p.lo = range_at.item(0, list[0]).as_number(NumRange{-std::numeric_limits<double>::infinity()});
    p.hi = range_at.item(1, list[1]).as_number(NumRange{-std::numeric_limits<double>::infinity()});
  }
  if (!(p.lo < p.hi) && !(p.kind == ParamKind::integer && p.lo == p.hi))
    range_at.fail(fmt::format("expected lo < hi, got [{}, {}]", p.lo, p.hi));
  if (p.kind == ParamKind::log_uniform && p.lo <= 0.0)
    range_at.fail(fmt::format("log_uniform needs lo > 0, got {}", p.lo));
  return p;
}

std::vector<ParamSpec> parse_space(const Reader& at) {
  const MapReader m(at);
  if (m.size() == 0) at.fail("expected at least one search parameter");
  std::vector<ParamSpec> space;
  for (const auto& name : m.keys()) space.push_back(parse_param(name, *m.get(name)));
  return space;
}

void collect(const Reader& at, std::vector<Reference>& out) {
  const YAML::Node& node = at.node();
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text.size() > 1 && text[0] == '$') out.push_back({text.substr(1), at});
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) collect(at.item(i, node[i]), out);
  } else if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
      collect(at.with(it->second, join_path(at.path(), key),
                      to_source_mark(it->second.Mark(), at.mark())),
              out);
    }
  }
}

void replace_in_place(YAML::Node node, const std::map<std::string, std::string>& values) {
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text.size() > 1 && text[0] == '$') {
      const auto found = values.find(text.substr(1));
      if (found != values.end()) node = found->second;
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) replace_in_place(node[i], values);
  } else if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) replace_in_place(it->second, values);
  }
}

}  // namespace

PruneSettings parse_prune(const MapReader& m) {
  static constexpr std::string_view known[] = {"rule", "after_epochs", "min_trials",
                                               "reduction_factor"};
  m.allow_only(known);
  PruneSettings p;
  read(m, "rule", p.rule, EnumNames<PruneRule>::choices, "pruning rule");
  read(m, "after_epochs", p.after_epochs, at_least_1);
  read(m, "min_trials", p.min_trials, at_least_1);
  read(m, "reduction_factor", p.reduction_factor, IntRange{2});
  auto only_for = [&](std::string_view key, PruneRule rule) {
    if (p.rule != rule && m.get(key))
      m.require(key).fail(fmt::format("{} is a setting of rule {}, not of {}", key, to_string(rule),
                                      to_string(p.rule)));
  };
  only_for("min_trials", PruneRule::median);
  only_for("reduction_factor", PruneRule::asha);
  return p;
}

HpoSpec parse_hpo(const MapReader& m) {
  static constexpr std::string_view genetic_only[] = {"population",
                                                      "generations",
                                                      "tournament",
                                                      "elites",
                                                      "demes",
                                                      "migration_interval",
                                                      "migrants",
                                                      "blend_alpha",
                                                      "crossover_rate",
                                                      "mutation_sigma",
                                                      "mutation_rate",
                                                      "mutation_probability",
                                                      "mutation_decay",
                                                      "step_adaptation",
                                                      "patience",
                                                      "schedule",
                                                      "surrogate_candidates"};
  static constexpr std::string_view other_keys[] = {
      "algorithm",       "space",          "prune",
      "max_epochs",      "target",         "max_trainings",
      "trials",          "startup_trials", "multivariate",
      "grid_points",     "fitness",        "direction",
      "trial_timeout_s", "keep_top",       "parallel",
      "interval",        "quantile",       "resample_probability"};
  static const std::vector<std::string_view> known = [] {
    std::vector<std::string_view> keys(std::begin(other_keys), std::end(other_keys));
    keys.insert(keys.end(), std::begin(genetic_only), std::end(genetic_only));
    return keys;
  }();
  m.allow_only(known);
  HpoSpec h;
  read(m, "algorithm", h.algorithm, EnumNames<SearchAlgorithm>::choices, "search algorithm");
  if (auto space = m.get("space"))
    h.space = parse_space(*space);  // a function objective brings its own
  read(m, "population", h.population, IntRange{2});
  read(m, "generations", h.generations, at_least_1);
  read(m, "tournament", h.tournament, at_least_1);
  read(m, "elites", h.elites, at_least_0);
  read(m, "demes", h.demes, at_least_1);
  read(m, "migration_interval", h.migration_interval, at_least_1);
  read(m, "migrants", h.migrants, at_least_0);
  read(m, "blend_alpha", h.blend_alpha, non_negative);
  read(m, "crossover_rate", h.crossover_rate, NumRange{0.0, 1.0});
  read(m, "mutation_sigma", h.mutation_sigma, non_negative);
  read(m, "mutation_rate", h.mutation_rate, NumRange{0.0, 1.0});
  read(m, "mutation_probability", h.mutation_probability, NumRange{0.0, 1.0});
  read(m, "mutation_decay", h.mutation_decay, NumRange{0.0, 1.0, true, false});
  read(m, "step_adaptation", h.step_adaptation, non_negative);
  read(m, "patience", h.patience, at_least_0);
  read(m, "schedule", h.schedule, EnumNames<SearchSchedule>::choices, "schedule");
  read(m, "surrogate_candidates", h.surrogate_candidates, at_least_0);
  if (auto p = m.get("prune")) h.prune = parse_prune(MapReader(*p));
  read(m, "max_epochs", h.max_epochs, at_least_0);
  if (auto t = m.get("target")) {
    h.has_target = true;
    h.target = t->as_number(NumRange{-std::numeric_limits<double>::infinity()});
  }
  read(m, "max_trainings", h.max_trainings, at_least_0);
  read(m, "trials", h.trials, at_least_1);
  read(m, "startup_trials", h.startup_trials, at_least_1);
  read(m, "multivariate", h.multivariate);
  read(m, "grid_points", h.grid_points, IntRange{2});
  static constexpr std::array<Choice<bool>, 2> fitness_choices{
      {{"val_accuracy", true}, {"val_loss", false}}};
  bool accuracy = true;
  read(m, "fitness", accuracy, fitness_choices, "fitness");
  h.fitness = accuracy ? "val_accuracy" : "val_loss";
  h.maximize = accuracy;
  static constexpr std::array<Choice<bool>, 2> direction_choices{
      {{"maximize", true}, {"minimize", false}}};
  read(m, "direction", h.maximize, direction_choices, "direction");
  h.direction_given = m.get("direction").has_value();
  read(m, "trial_timeout_s", h.trial_timeout_s, non_negative);
  read(m, "keep_top", h.keep_top, at_least_1);
  read(m, "interval", h.interval, at_least_1);
  read(m, "quantile", h.quantile, NumRange{0.0, 0.5, true, false});
  read(m, "resample_probability", h.resample_probability, NumRange{0.0, 1.0});
  // A setting of another algorithm is a mistake (a random search with max_trainings would ignore
  // it): name the algorithm it belongs to.
  // A config that relied on the genetic search being the default is told what to add.
  const std::string algorithm =
      m.get("algorithm") ? std::string(to_string(h.algorithm))
                         : fmt::format("{} (the default; add `algorithm: NAME` for another)",
                                       to_string(h.algorithm));
  auto only_for = [&](std::string_view key, bool applies, const char* owners) {
    if (!applies && m.get(key))
      m.require(key).fail(
          fmt::format("{} is a setting of algorithm {}, not of {}", key, owners, algorithm));
  };
  const bool pbt = h.algorithm == SearchAlgorithm::pbt;
  for (auto key : genetic_only) {
    if (key == "population")
      only_for(key, h.algorithm == SearchAlgorithm::genetic || pbt, "genetic or pbt");
    else
      only_for(key, h.algorithm == SearchAlgorithm::genetic, "genetic");
  }
  const bool counts_trials = runs_trials(h.algorithm);
  only_for("trials", counts_trials, "random, tpe or gp");
  only_for("startup_trials",
           h.algorithm == SearchAlgorithm::tpe || h.algorithm == SearchAlgorithm::gp, "tpe or gp");
  only_for("multivariate", h.algorithm == SearchAlgorithm::tpe, "tpe");
  only_for("grid_points", h.algorithm == SearchAlgorithm::grid, "grid");
  only_for("max_trainings", !counts_trials && !pbt,
           "genetic or grid (random, tpe and gp search run `trials`, pbt its population)");
  for (auto key : {"interval", "quantile", "resample_probability"}) only_for(key, pbt, "pbt");
  // A PBT member trains once, whole: there is no other training to give its epochs to.
  for (auto key : {"prune", "max_epochs", "trial_timeout_s", "target"})
    only_for(key, !pbt, "genetic, random, tpe, gp or grid");
  if (pbt && h.keep_top > h.population)
    m.require("keep_top")
        .fail(
            fmt::format("pbt keeps the weights of its {} members at most: expected keep_top <= {}",
                        h.population, h.population));
  if (h.schedule == SearchSchedule::asynchronous && h.demes != 1)
    m.require("demes").fail(fmt::format(
        "the asynchronous schedule keeps one steady-state population: expected demes: 1, not {}",
        h.demes));
  if (!pbt && h.elites >= h.population / h.demes)
    m.require("elites").fail(fmt::format("expected fewer elites than the {} individuals of a deme",
                                         h.population / h.demes));
  return h;
}

std::vector<Reference> find_references(const Reader& root) {
  std::vector<Reference> out;
  for (auto it = root.node().begin(); it != root.node().end(); ++it) {
    if (it->first.Scalar() == "stages") continue;
    collect(
        root.with(it->second, it->first.Scalar(), to_source_mark(it->second.Mark(), root.mark())),
        out);
  }
  return out;
}

void reject_references(const Reader& stages) {
  std::vector<Reference> found;
  collect(stages, found);
  if (found.empty()) return;
  const std::string& name = found.front().name;
  // "$HOME/w.h5" is more likely a shell variable than a search parameter.
  const bool variable_like = std::any_of(name.begin(), name.end(), [](char ch) {
    return ch == '/' || std::isupper(static_cast<unsigned char>(ch)) != 0;
  });
  found.front().at.fail(
      fmt::format("'${}': a search parameter takes a new value in every trial, so it may stand "
                  "anywhere but in stages, whose settings hold for the whole run{}",
                  name, variable_like ? " (an environment variable is written ${NAME})" : ""));
}

// A YAML::Node is a handle: `root` by value still changes the caller's tree.
void substitute(YAML::Node root,  // NOLINT(performance-unnecessary-value-param)
                const std::map<std::string, std::string>& values) {
  replace_in_place(root, values);
}

}  // namespace strata::config_reader

namespace strata {

std::string trial_config_text(const Config& base, const std::map<std::string, std::string>& values,
                              const std::string& output_dir) {
  // The run's tree: environment variables expanded and overrides applied, so the file says what
  // was run.
  YAML::Node root = load_config_tree(base.text, base.file, base.overrides);
  config_reader::substitute(root, values);
  root.remove("stages");
  root["output"]["dir"] = output_dir;
  // The file is written elsewhere than the config it comes from: its data path must not depend on
  // where it lies.
  if (!base.data.path.empty())
    root["data"]["path"] = std::filesystem::absolute(base.data.path).lexically_normal().string();
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::string trained_config_text(const Config& config) {
  YAML::Node root = YAML::Load(trial_config_text(config, {}, config.output.dir));
  root["run"]["seed"] = config.run.seed;
  root["training"]["epochs"] = config.training.epochs;
  root["training"]["local_batch"] = config.training.local_batch;
  root["training"]["optimizer"]["lr"] = config.training.optimizer.lr;
  if (!config.data.classes.empty()) root["data"]["classes"] = config.data.classes;
  if (config.data.samples_per_class > 0)
    root["data"]["samples_per_class"] = config.data.samples_per_class;
  // The last dense layer as the struct has it (resized for a new label set).
  YAML::Node layers = root["model"]["layers"];
  for (auto it = config.layers.rbegin(); it != config.layers.rend(); ++it)
    if (it->kind == LayerKind::dense) {
      const auto index = static_cast<std::size_t>(it.base() - config.layers.begin() - 1);
      if (index < layers.size() && layers[index].IsMap() && layers[index]["dense"])
        layers[index]["dense"]["units"] = it->units;
      break;
    }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

}  // namespace strata
