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
