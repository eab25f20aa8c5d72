// The artifacts stages hand on survive the run's checkpoint: saved into a state and restored into
// an empty registry, every artifact comes back; a missing one is named with those that exist.
#include <catch2/catch.hpp>

#include "core/errors.hpp"
#include "jobs/artifacts.hpp"
#include "jobs/stage.hpp"

using namespace strata;
using Catch::Matchers::Contains;

TEST_CASE("artifacts round-trip through the run's state", "[jobs][artifacts][state]") {
  Artifacts published;
  published.publish("hpo.best", {{"trial", 7}, {"fitness", 0.8125}, {"config", "best.yaml"}});
  published.publish("train.model", {{"members", {{{"member", 0}, {"weights", "weights.h5"}}}}});
  StateDict state;
  published.save_state(state, "run");
  Artifacts restored;
  REQUIRE_FALSE(restored.has("hpo.best"));
  restored.load_state(state, "run");
  CHECK(restored.items() == published.items());
  CHECK(restored.get("hpo.best")["fitness"] == 0.8125);
  CHECK_THROWS_WITH(restored.get("ensemble.members"),
                    Contains("no artifact ensemble.members") && Contains("hpo.best, train.model"));
}

TEST_CASE("each stage names the artifacts it publishes", "[jobs][artifacts]") {
  Config config = parse_config(R"(data: {source: synthetic}
model: {layers: [flatten, {dense: {units: $u}}]}
stages: [train, {hpo: {space: {u: {int: [4, 10]}}}}, train]
)",
                               "stages.yaml");
  const auto stages = make_stages(config);
  REQUIRE(stages.size() == 3);
  CHECK(stages[0]->name() == "train");
  CHECK(stages[0]->publishes() == std::vector<std::string>{"train.model"});
  CHECK(stages[1]->publishes() == std::vector<std::string>{"hpo.best", "hpo.top_k"});
  CHECK(stages[2]->name() == "train2");
}

TEST_CASE("a stage that reads an artifact no earlier stage publishes fails at its line",
          "[jobs][artifacts]") {
  // The ensemble comes before the search it reads from.
  const Config early = parse_config(R"(data: {source: synthetic}
model: {layers: [flatten, {dense: {units: $u}}]}
stages:
  - ensemble: {from: hpo.top_k}
  - hpo: {space: {u: {int: [4, 10]}}}
)",
                                    "early.yaml");
  CHECK_THROWS_AS(make_stages(early), ConfigError);
  CHECK_THROWS_WITH(make_stages(early),
                    Contains("early.yaml:4:22: stages: ensemble: no earlier stage publishes "
                             "'hpo.top_k' (published before this stage: none)"));
  // An artifact of the wrong kind: a train stage's weights hold no configs.
  const Config wrong = parse_config(R"(data: {source: synthetic}
model: {layers: [flatten, {dense: {units: 10}}]}
stages:
  - train
  - ensemble:
      from: train.model
)",
                                    "wrong.yaml");
  CHECK_THROWS_WITH(make_stages(wrong),
                    Contains("wrong.yaml:6:13: stages: ensemble: 'train.model' will not do: an "
                             "ensemble's members come from a search's .top_k or .best"));
  // A later search of the same kind is named hpo2.
  const Config later = parse_config(R"(data: {source: synthetic}
model: {layers: [flatten, {dense: {units: $u}}]}
stages:
  - hpo: {space: {u: {int: [4, 10]}}}
  - ensemble: {from: hpo2.best}
)",
                                    "later.yaml");
  CHECK_THROWS_WITH(make_stages(later), Contains("later.yaml:5:22") &&
                                            Contains("'hpo2.best' (published before this stage: "
                                                     "hpo.best, hpo.top_k)"));
  const Config fine = parse_config(R"(data: {source: synthetic}
model: {layers: [flatten, {dense: {units: $u}}]}
stages:
  - hpo: {space: {u: {int: [4, 10]}}, keep_top: 3}
  - ensemble: {from: hpo.top_k}
)",
                                   "fine.yaml");
  const auto stages = make_stages(fine);
  REQUIRE(stages.size() == 2);
  CHECK(stages[1]->publishes() == std::vector<std::string>{"ensemble.members"});
  REQUIRE(stages[1]->reads().size() == 1);
  CHECK(stages[1]->reads()[0].ref.name == "hpo.top_k");
}

TEST_CASE("each stage plans with its own parallel block", "[jobs][plan]") {
  const Config config = parse_config(R"(data: {source: synthetic}
model: {layers: [flatten, {dense: {units: 16, split: column}}, relu, {dense: {units: 10, split: row}}]}
training: {local_batch: 16}
parallel: {max_global_batch: 32, model: 1}
stages:
  - train
  - ensemble:
      seeds: 2
      parallel: {model: 2}
)",
                                     "plans.yaml");
  const auto stages = make_stages(config);
  const Plan first = stages[0]->plan(config, 4, 4), second = stages[1]->plan(config, 4, 4);
  CHECK(first.model == 1);
  CHECK(second.model == 2);
  // Keys the stage leaves out keep the run's values: the bound on the global batch.
  CHECK(second.max_global_batch == 32);
  CHECK(first.global_batch() <= 32);
  CHECK(second.global_batch() <= 32);
  CHECK(first.groups * first.data * first.model == 4);
  CHECK(second.groups * second.data * second.model == 4);
}
