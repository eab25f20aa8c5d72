// The hpo stage in YAML: its settings and search space, and "$name" references checked at every
// value the parameter can take, with the reference's line and column.
#include <catch2/catch.hpp>

#include <string>

#include "core/config.hpp"
#include "core/errors.hpp"

using namespace strata;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

const std::string search_yaml = R"(data: {source: synthetic}
model:
  layers:
    - flatten
    - dense: {units: $units, init: glorot}
    - relu
    - dropout: {rate: $dropout}
    - dense: {units: 10}
training:
  local_batch: $batch
  optimizer: {type: $optimizer, lr: $lr}
stages:
  - hpo:
      algorithm: genetic
      population: 6
      generations: 3
      fitness: val_loss
      target: 0.3
      space:
        lr: {log_uniform: [1.0e-4, 0.1]}
        dropout: {uniform: [0.0, 0.5]}
        units: {int: [16, 128]}
        batch: {choice: [32, 64]}
        optimizer: {choice: [sgd, adam]}
)";

std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "s.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("no ConfigError");
  return {};
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

}  // namespace

TEST_CASE("an hpo stage parses with its space", "[config][hpo]") {
  const Config c = parse_config(search_yaml, "s.yaml");
  REQUIRE(c.stages.size() == 1);
  const HpoSpec& h = std::get<HpoSpec>(c.stages[0].settings);
  CHECK(c.stages[0].kind() == StageKind::hpo);
  CHECK(h.population == 6);
  CHECK(h.generations == 3);
  CHECK(h.fitness == "val_loss");
  CHECK_FALSE(h.maximize);  // a loss is minimised unless `direction` says otherwise
  CHECK(h.has_target);
  CHECK(h.target == 0.3);
  const auto& space = search_space(c);
  REQUIRE(space.size() == 5);
  CHECK(space[0].name == "lr");
  CHECK(space[0].kind == ParamKind::log_uniform);
  CHECK(space[0].lo == 1.0e-4);
  CHECK(space[2].kind == ParamKind::integer);
  CHECK(space[3].choices == std::vector<std::string>{"32", "64"});
  // The base config takes every parameter's first value.
  CHECK(c.training.optimizer.lr == 1.0e-4);
  CHECK(c.layers[1].units == 16);
  CHECK(c.training.local_batch == 32);
  // The run is planned for the largest local batch a trial can have.
  CHECK(c.training.largest_searched_local_batch == 64);
  const Config wider = parse_config(replace(search_yaml, "[32, 64]", "[32, 256, 64]"), "s.yaml");
  CHECK(wider.training.local_batch == 32);
  CHECK(wider.training.largest_searched_local_batch == 256);
  const Config trial = instantiate(
      c,
      {{"lr", "0.01"}, {"dropout", "0.1"}, {"units", "20"}, {"batch", "32"}, {"optimizer", "sgd"}});
  CHECK(trial.training.local_batch == 32);
  CHECK_FALSE(trial.training.largest_searched_local_batch.has_value());
}

TEST_CASE("a trial's config has its values in place of the references", "[config][hpo]") {
  const Config base = parse_config(search_yaml, "s.yaml");
  const Config trial = instantiate(base, {{"lr", "0.02"},
                                          {"dropout", "0.25"},
                                          {"units", "48"},
                                          {"batch", "64"},
                                          {"optimizer", "adam"}});
  CHECK(trial.training.optimizer.lr == 0.02);
  CHECK(trial.training.optimizer.kind == OptimizerKind::adam);
  CHECK(trial.layers[1].units == 48);
  CHECK(trial.layers[3].rate == 0.25f);
  CHECK(trial.training.local_batch == 64);
  CHECK(trial.stages[0].kind() == StageKind::hpo);
  // A value outside what the key accepts is an error at the reference's place.
  CHECK_THAT(
      [&] {
        try {
          instantiate(base, {{"lr", "-1"},
                             {"dropout", "0"},
                             {"units", "8"},
                             {"batch", "32"},
                             {"optimizer", "sgd"}});
        } catch (const ConfigError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      Contains("s.yaml:11:37: training.optimizer.lr: expected a positive number, got -1"));
}

TEST_CASE("references are checked at every value their parameter can take", "[config][hpo]") {
  CHECK(error_of(replace(search_yaml, "lr: $lr", "lr: $rate")) ==
        "s.yaml:11:37: training.optimizer.lr: unknown search parameter '$rate' (known: $lr, "
        "$dropout, $units, "
        "$batch, $optimizer)");
  // A searched parameter that nothing refers to would only repeat trainings.
  CHECK(error_of(replace(search_yaml, "rate: $dropout", "rate: 0.25")) ==
        "s.yaml:21:18: stages: hpo: space.dropout: search parameter 'dropout' is not used: nothing "
        "in the config refers to $dropout (write $dropout where its value goes, or remove it from "
        "the space)");
  // dropout's upper bound 0.9 is fine, but a rate of 1.0 is not: checked at the bound.
  CHECK_THAT(
      error_of(
          replace(search_yaml, "dropout: {uniform: [0.0, 0.5]}", "dropout: {uniform: [0.0, 1.0]}")),
      Contains(
          "s.yaml:7:23: model.layers[3].dropout.rate: expected a number in [0, 1), got 1 (when "
          "search parameter dropout = 1)"));
  // A real-valued parameter where an integer is needed.
  CHECK_THAT(
      error_of(replace(search_yaml, "units: {int: [16, 128]}", "units: {uniform: [16, 128]}")),
      Contains(
          "s.yaml:5:22: model.layers[1].dense.units: expected an integer, got '53.333333333333336' "
          "(when search parameter units = 53.333333333333336)"));
  CHECK_THAT(error_of(replace(search_yaml, "optimizer: {choice: [sgd, adam]}",
                              "optimizer: {choice: [sgd, lbfgs]}")),
             Contains("unknown optimizer type 'lbfgs'"));
  CHECK_THAT(
      error_of("data: {source: synthetic}\nmodel: {layers: [flatten, {dense: {units: $u}}]}\n"),
      Contains(
          "s.yaml:2:43: model.layers[1].dense.units: '$u' refers to a search parameter, but no hpo "
          "stage defines a space"));
}

TEST_CASE("search space entries are checked", "[config][hpo]") {
  CHECK_THAT(
      error_of(replace(search_yaml, "{log_uniform: [1.0e-4, 0.1]}", "{log_uniform: [0, 0.1]}")),
      Contains("stages[0].hpo.space.lr.log_uniform: log_uniform needs lo > 0, got 0"));
  CHECK_THAT(error_of(replace(search_yaml, "{int: [16, 128]}", "{int: [128, 16]}")),
             Contains("expected lo < hi, got [128, 16]"));
  CHECK_THAT(error_of(replace(search_yaml, "{choice: [32, 64]}", "{choice: [32, 32]}")),
             Contains("'32' is listed twice"));
  CHECK_THAT(
      error_of(replace(search_yaml, "{choice: [32, 64]}", "{normal: [32, 64]}")),
      Contains("unknown parameter type 'normal' (known: uniform, log_uniform, int, choice)"));
  CHECK_THAT(error_of(replace(search_yaml, "population: 6", "population: 6\n      elitism: 2")),
             Contains("stages[0].hpo.elitism: unknown key"));
  CHECK_THAT(error_of(replace(search_yaml, "population: 6", "population: 6\n      elites: 6")),
             Contains("expected fewer elites than the 6 individuals of a deme"));
}

TEST_CASE("a setting of another search algorithm is an error at its place", "[config][hpo]") {
  const std::string random = replace(search_yaml, "algorithm: genetic", "algorithm: random");
  CHECK_THAT(error_of(random),
             Contains("s.yaml:15:19: stages[0].hpo.population: population is a setting of "
                      "algorithm genetic or pbt, not of random"));
  const std::string plain_random = replace(replace(random, "      population: 6\n", ""),
                                           "      generations: 3\n", "      trials: 5\n");
  CHECK(parse_config(plain_random, "s.yaml").stages.size() == 1);
  CHECK_THAT(error_of(replace(plain_random, "trials: 5", "trials: 5\n      max_trainings: 3")),
             Contains("max_trainings is a setting of algorithm genetic or grid (random, tpe and gp "
                      "search run `trials`, pbt its population), not of random"));
  CHECK_THAT(error_of(replace(search_yaml, "population: 6", "population: 6\n      trials: 9")),
             Contains("trials is a setting of algorithm random, tpe or gp, not of genetic"));
  CHECK_THAT(error_of(replace(search_yaml, "population: 6", "population: 6\n      grid_points: 3")),
             Contains("grid_points is a setting of algorithm grid, not of genetic"));
}

TEST_CASE("a function objective replaces the layers and needs no data", "[config][hpo]") {
  const std::string yaml =
      R"(model: {objective: rastrigin, dims: 10, eval_seconds: 0.01, eval_stddev_seconds: 0.005}
stages:
  - hpo: {algorithm: genetic, population: 4}
)";
  const Config c = parse_config(yaml, "s.yaml");
  REQUIRE(c.objective);
  CHECK(c.objective->name == "rastrigin");
  CHECK(c.objective->dims == 10);
  CHECK(c.objective->eval_seconds == 0.01);
  CHECK(c.objective->eval_stddev_seconds == 0.005);
  CHECK(c.layers.empty());
  CHECK_THAT(error_of(replace(yaml, "rastrigin", "himmelblau")),
             Equals("s.yaml:1:20: model.objective: unknown objective 'himmelblau' (known: "
                    "rastrigin, sphere, rosenbrock, "
                    "ackley)"));
  CHECK_THAT(error_of(replace(yaml, "dims: 10, ", "")),
             Contains("model: missing required key 'dims'"));
  CHECK_THAT(error_of(replace(yaml, "{objective: rastrigin,",
                              "{layers: [flatten], objective: rastrigin,")),
             Contains("model.layers: a model has either layers or an objective, not both"));
  CHECK_THAT(error_of("model: {layers: [flatten, {dense: {units: 2}}]}\n"),
             Contains("missing required key 'data'"));
}

TEST_CASE("mutation_probability, mutation_decay and step_adaptation parse and are checked",
          "[config][hpo]") {
  const auto with = [](const std::string& settings) {
    return replace(search_yaml, "      population: 6\n", "      population: 6\n" + settings);
  };
  const HpoSpec defaults;
  REQUIRE(defaults.mutation_probability != 0.8);
  REQUIRE(defaults.step_adaptation != 0.0);
  const Config c = parse_config(
      with(
          "      mutation_probability: 0.8\n      mutation_decay: 0.9\n      step_adaptation: 0\n"),
      "s.yaml");
  const auto& h = std::get<HpoSpec>(c.stages.front().settings);
  CHECK(h.mutation_probability == 0.8);
  CHECK(h.mutation_decay == 0.9);
  CHECK(h.step_adaptation == 0.0);
  CHECK(error_of(with("      step_adaptation: -1\n")) ==
        "s.yaml:16:24: stages[0].hpo.step_adaptation: expected a number >= 0, got -1");
  CHECK(error_of(with("      mutation_decay: 0\n")) ==
        "s.yaml:16:23: stages[0].hpo.mutation_decay: expected a number in (0, 1], got 0");
  CHECK(error_of(with("      mutation_probability: 2\n")) ==
        "s.yaml:16:29: stages[0].hpo.mutation_probability: expected a number in [0, 1], got 2");
}

TEST_CASE("schedule parses, and the asynchronous one takes a single deme", "[config][hpo]") {
  const auto with = [](const std::string& settings) {
    return replace(search_yaml, "      population: 6\n", "      population: 6\n" + settings);
  };
  REQUIRE(HpoSpec{}.schedule == SearchSchedule::generational);
  const Config c = parse_config(with("      schedule: asynchronous\n"), "s.yaml");
  CHECK(std::get<HpoSpec>(c.stages.front().settings).schedule == SearchSchedule::asynchronous);
  CHECK_THAT(error_of(with("      schedule: async\n")), Contains("stages[0].hpo.schedule") &&
                                                            Contains("generational") &&
                                                            Contains("asynchronous"));
  CHECK(error_of(with("      schedule: asynchronous\n      demes: 2\n")) ==
        "s.yaml:17:14: stages[0].hpo.demes: the asynchronous schedule keeps one steady-state "
        "population: expected demes: 1, not 2");
  const std::string random_search =
      replace(replace(search_yaml, "      population: 6\n      generations: 3\n",
                      "      schedule: asynchronous\n"),
              "algorithm: genetic", "algorithm: random");
  CHECK_THAT(error_of(random_search),
             Contains("schedule is a setting of algorithm genetic, not of random"));
}

TEST_CASE("prune and max_epochs parse and are checked", "[config][hpo]") {
  const auto with = [](const std::string& settings) {
    return replace(replace(search_yaml, "training:\n", "training:\n  epochs: 3\n"),
                   "      population: 6\n", "      population: 6\n" + settings);
  };
  REQUIRE(HpoSpec{}.prune.rule == PruneRule::none);
  const Config c = parse_config(
      with("      prune: {rule: median, after_epochs: 2, min_trials: 4}\n      max_epochs: 50\n"),
      "s.yaml");
  const auto& h = std::get<HpoSpec>(c.stages.front().settings);
  CHECK(h.prune.rule == PruneRule::median);
  CHECK(h.prune.after_epochs == 2);
  CHECK(h.prune.min_trials == 4);
  CHECK(h.max_epochs == 50);
  const Config a = parse_config(with("      prune: {rule: asha, reduction_factor: 2}\n"), "s.yaml");
  CHECK(std::get<HpoSpec>(a.stages.front().settings).prune.reduction_factor == 2);
  CHECK_THAT(error_of(with("      prune: {rule: asha, min_trials: 3}\n")),
             Contains("min_trials is a setting of rule median, not of asha"));
  CHECK_THAT(error_of(with("      prune: {rule: median, reduction_factor: 3}\n")),
             Contains("reduction_factor is a setting of rule asha, not of median"));
  CHECK_THAT(error_of(with("      prune: {rule: sometimes}\n")),
             Contains("stages[0].hpo.prune.rule") && Contains("median"));
  CHECK_THAT(error_of(with("      prune: {rule: median, after_epochs: 3}\n")),
             Contains("prune.after_epochs is 3, but trainings run 3 epoch(s)"));
  CHECK_THAT(error_of(with("      prune: {rule: median, patience: 3}\n")),
             Contains("stages[0].hpo.prune.patience: unknown key"));
  CHECK_THAT(error_of(with("      max_epochs: -1\n")), Contains("stages[0].hpo.max_epochs"));
}

TEST_CASE("algorithm tpe takes trials and startup_trials", "[config][hpo]") {
  const std::string tpe =
      replace(replace(replace(search_yaml, "algorithm: genetic", "algorithm: tpe"),
                      "      population: 6\n", "      trials: 30\n      startup_trials: 7\n"),
              "      generations: 3\n", "");
  const Config c = parse_config(tpe, "s.yaml");
  const auto& h = std::get<HpoSpec>(c.stages.front().settings);
  CHECK(h.algorithm == SearchAlgorithm::tpe);
  CHECK(h.trials == 30);
  CHECK(h.startup_trials == 7);
  CHECK_FALSE(h.multivariate);
  const Config joint =
      parse_config(replace(tpe, "trials: 30", "trials: 30\n      multivariate: true"), "s.yaml");
  CHECK(std::get<HpoSpec>(joint.stages.front().settings).multivariate);
  CHECK_THAT(
      error_of(replace(search_yaml, "population: 6", "population: 6\n      multivariate: true")),
      Contains("multivariate is a setting of algorithm tpe, not of genetic"));
  CHECK_THAT(error_of(replace(tpe, "trials: 30", "trials: 30\n      population: 4")),
             Contains("population is a setting of algorithm genetic or pbt, not of tpe"));
  CHECK_THAT(
      error_of(replace(search_yaml, "population: 6", "population: 6\n      startup_trials: 3")),
      Contains("startup_trials is a setting of algorithm tpe or gp, not of genetic"));
}

TEST_CASE("algorithm gp takes trials and startup_trials, not multivariate", "[config][hpo]") {
  const std::string gp =
      replace(replace(replace(search_yaml, "algorithm: genetic", "algorithm: gp"),
                      "      population: 6\n", "      trials: 30\n      startup_trials: 4\n"),
              "      generations: 3\n", "");
  const Config c = parse_config(gp, "s.yaml");
  const auto& h = std::get<HpoSpec>(c.stages.front().settings);
  CHECK(h.algorithm == SearchAlgorithm::gp);
  CHECK(h.trials == 30);
  CHECK(h.startup_trials == 4);
  CHECK_THAT(error_of(replace(gp, "trials: 30", "trials: 30\n      multivariate: true")),
             Contains("multivariate is a setting of algorithm tpe, not of gp"));
  CHECK_THAT(error_of(replace(gp, "trials: 30", "trials: 30\n      max_trainings: 9")),
             Contains("max_trainings is a setting of algorithm genetic or grid (random, tpe and gp "
                      "search run `trials`"));
}

TEST_CASE("a search without algorithm is gp, and a genetic setting there says what to add",
          "[config][hpo]") {
  const std::string genetic_keys = replace(search_yaml, "      algorithm: genetic\n", "");
  const std::string plain =
      replace(replace(genetic_keys, "      population: 6\n", ""), "      generations: 3\n", "");
  const Config c = parse_config(plain, "s.yaml");
  CHECK(std::get<HpoSpec>(c.stages.front().settings).algorithm == SearchAlgorithm::gp);
  CHECK_THAT(error_of(genetic_keys),
             Contains("s.yaml:14:19: stages[0].hpo.population: population is a setting of "
                      "algorithm genetic or pbt, not of gp (the default; add `algorithm: NAME` "
                      "for another)"));
}

TEST_CASE("surrogate_candidates is a genetic setting", "[config][hpo]") {
  const Config c = parse_config(
      replace(search_yaml, "population: 6", "population: 6\n      surrogate_candidates: 8"),
      "s.yaml");
  CHECK(std::get<HpoSpec>(c.stages.front().settings).surrogate_candidates == 8);
  CHECK_THAT(error_of(replace(search_yaml, "population: 6",
                              "population: 6\n      surrogate_candidates: -1")),
             Contains("stages[0].hpo.surrogate_candidates"));
}

TEST_CASE("algorithm pbt searches what can change while a model trains", "[config][hpo]") {
  const std::string pbt = R"(data: {source: synthetic}
model:
  layers:
    - flatten
    - dense: {units: 32, init: glorot}
    - relu
    - dropout: {rate: $dropout}
    - dense: {units: 10}
training:
  epochs: 4
  local_batch: 32
  optimizer: {type: sgd, lr: $lr, momentum: $momentum}
  schedule: {type: cosine, min_lr: $floor}
stages:
  - hpo:
      algorithm: pbt
      population: 6
      interval: 2
      quantile: 0.5
      resample_probability: 0.1
      keep_top: 2
      space:
        lr: {log_uniform: [1.0e-4, 0.1]}
        momentum: {uniform: [0.0, 0.99]}
        dropout: {uniform: [0.0, 0.5]}
        floor: {uniform: [0.0, 1.0e-5]}
)";
  const Config c = parse_config(pbt, "p.yaml");
  const auto& h = std::get<HpoSpec>(c.stages.front().settings);
  CHECK(h.algorithm == SearchAlgorithm::pbt);
  CHECK(h.population == 6);
  CHECK(h.interval == 2);
  CHECK(h.quantile == 0.5);
  CHECK(h.resample_probability == 0.1);
  // What fixes the model's shape, the batch or the optimizer's kind is refused at its reference.
  CHECK_THAT(
      error_of(replace(replace(pbt, "units: 32,", "units: $units,"), "      space:\n",
                       "      space:\n        units: {int: [16, 64]}\n")),
      Contains("s.yaml:5:") &&
          Contains("pbt changes $units while a model trains, but model.layers[1].dense.units "
                   "cannot change between epochs"));
  CHECK_THAT(
      error_of(replace(replace(pbt, "local_batch: 32", "local_batch: $batch"), "      space:\n",
                       "      space:\n        batch: {choice: [16, 32]}\n")),
      Contains("training.local_batch cannot change"));
  CHECK_THAT(
      error_of(replace(
          replace(replace(pbt, "type: sgd, lr: $lr, momentum: $momentum", "type: $opt, lr: $lr"),
                  "        momentum: {uniform: [0.0, 0.99]}\n", ""),
          "      space:\n", "      space:\n        opt: {choice: [sgd, adam]}\n")),
      Contains("training.optimizer.type cannot change"));
  CHECK_THAT(error_of(replace(pbt, "interval: 2", "interval: 4")),
             Contains("interval is 4 epoch(s), but training.epochs is 4"));
  CHECK_THAT(error_of(replace(pbt, "quantile: 0.5", "quantile: 0.6")),
             Contains("stages[0].hpo.quantile"));
  CHECK_THAT(error_of(replace(pbt, "keep_top: 2", "keep_top: 7")),
             Contains("expected keep_top <= 6"));
  CHECK_THAT(error_of(replace(pbt, "interval: 2", "interval: 2\n      generations: 3")),
             Contains("generations is a setting of algorithm genetic, not of pbt"));
  CHECK_THAT(
      error_of(replace(pbt, "interval: 2", "interval: 2\n      prune: {rule: median}")),
      Contains("prune is a setting of algorithm genetic, random, tpe, gp or grid, not of pbt"));
  CHECK_THAT(
      error_of(replace(pbt, "interval: 2", "interval: 2\n      target: 0.9")),
      Contains("target is a setting of algorithm genetic, random, tpe, gp or grid, not of pbt"));
  CHECK_THAT(error_of(replace(search_yaml, "population: 6", "population: 6\n      interval: 2")),
             Contains("interval is a setting of algorithm pbt, not of genetic"));
}
