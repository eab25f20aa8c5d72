// trials.csv, trials.jsonl and hpo_summary.json hold every training, failures included, in forms
// that other tools read back.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hpo/objectives.hpp"
#include "hpo/random_search.hpp"
#include "hpo/trial_log.hpp"
#include "tests/core/temp_dir.hpp"

using namespace strata;

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("the trial log records every training as it ends", "[hpo][trial_log]") {
  strata::testing::TempDir dir;
  SearchSpace space = objective_space("sphere", 2);
  space.params.push_back({"optimizer", ParamKind::choice, 0.0, 0.0, {"sgd", "adam, nesterov"}});
  RandomSearch search(space, RandomConfig{6, 3, 0.5, Direction::minimize, 7});
  TrialLog log(dir.str(), search.space());
  int reported = 0;
  while (!search.done()) {
    for (const Trial& t : search.next_batch()) {
      TrialOutcome outcome;
      outcome.member_group = t.id % 2;
      outcome.seconds = 0.25 * t.id;
      outcome.global_batch = 64;
      const bool fail = t.id == 2;  // one diverged training, recorded and passed over
      if (fail) {
        outcome.status = TrialStatus::failed;
        outcome.reason = "training diverged: the loss is nan, at step 3";
      } else {
        outcome.fitness = sphere(std::span(t.genome).first(2));
        outcome.val_accuracy = 0.5;
        outcome.test_accuracy = 0.4;
      }
      search.report(t.id, fail ? std::numeric_limits<double>::quiet_NaN() : outcome.fitness, fail);
      log.append(search.trials()[static_cast<std::size_t>(t.id)], outcome);
      ++reported;
    }
  }
  REQUIRE(reported == 6);

  const auto csv = lines_of(dir.file("trials.csv"));
  REQUIRE(csv.size() == 7);
  CHECK(csv[0] ==
        "trial,generation,deme,member_group,x0,x1,optimizer,global_batch,epochs,fitness,"
        "val_accuracy,"
        "test_accuracy,"
        "seconds,ended_s,status,reason");
  CHECK(csv[3].find(",failed,\"training diverged: the loss is nan, at step 3\"") !=
        std::string::npos);
  // No numbers for the failed training, but its global batch.
  CHECK(csv[3].find(",64,0,,,,0.500,") != std::string::npos);

  const auto jsonl = lines_of(dir.file("trials.jsonl"));
  REQUIRE(jsonl.size() == 6);
  const auto failed = nlohmann::json::parse(jsonl[2]);
  CHECK(failed["status"] == "failed");
  CHECK(failed["fitness"].is_null());
  CHECK(failed["trial"] == 2);
  const auto first = nlohmann::json::parse(jsonl[0]);
  CHECK(first["status"] == "ok");
  CHECK(first["fitness"].get<double>() ==
        Approx(sphere(std::span(search.trials()[0].genome).first(2))));
  CHECK(first["params"].contains("optimizer"));
  CHECK(first["global_batch"] == 64);
  // ended_s: when each row was written, counted from the log's creation.
  double previous = 0.0;
  for (const auto& line : jsonl) {
    const double ended = nlohmann::json::parse(line)["ended_s"].get<double>();
    CHECK(ended >= previous);
    previous = ended;
  }
  CHECK(previous < 60.0);

  write_hpo_summary(dir.file("hpo_summary.json"), search, 12.5);
  std::ifstream in(dir.file("hpo_summary.json"));
  const auto summary = nlohmann::json::parse(in);
  const auto best = search.best();
  REQUIRE(best);
  CHECK(summary["best"]["trial"] == best->id);
  CHECK(summary["best"]["fitness"].get<double>() == Approx(best->fitness));
  CHECK(summary["best"]["params"].size() == 3);
  CHECK(summary["trainings"] == 6);
  CHECK(summary["wall_seconds"] == 12.5);
  CHECK(summary["direction"] == "minimize");
  CHECK(summary["generations"].size() == search.history().size());
  CHECK(summary["trainings_to_target"].is_null() == !search.trainings_to_target().has_value());
}

TEST_CASE("parameters are JSON numbers where they are numbers", "[hpo][trial_log]") {
  strata::testing::TempDir dir;
  SearchSpace space;
  space.params.push_back({"lr", ParamKind::log_uniform, 1e-4, 1.0, {}});
  space.params.push_back({"units", ParamKind::integer, 16, 512, {}});
  space.params.push_back({"batch", ParamKind::choice, 0.0, 0.0, {"16", "32"}});
  space.params.push_back({"optimizer", ParamKind::choice, 0.0, 0.0, {"sgd", "adam"}});
  RandomSearch search(space, RandomConfig{2, 2, std::nullopt, Direction::maximize, 3});
  const auto batch = search.next_batch();
  TrialLog log(dir.str(), search.space());
  TrialOutcome o;
  o.fitness = 0.5;
  log.append(batch[0], o);
  search.report(batch[0].id, 0.5);
  search.report(batch[1].id, 0.25);
  const auto row = nlohmann::json::parse(lines_of(dir.file("trials.jsonl"))[0]);
  CHECK(row["params"]["lr"].is_number_float());
  CHECK(row["params"]["lr"].get<double>() == batch[0].genome[0]);  // every bit
  CHECK(row["params"]["units"].is_number_integer());
  CHECK(row["params"]["batch"].is_number_integer());
  CHECK(row["params"]["optimizer"].is_string());
  // The CSV writes the same values as text.
  const auto csv = lines_of(dir.file("trials.csv"));
  CHECK(csv[1].find(fmt::format(",{},", batch[0].genome[0])) != std::string::npos);
  write_hpo_summary(dir.file("hpo_summary.json"), search, 1.0);
  std::ifstream in(dir.file("hpo_summary.json"));
  const auto summary = nlohmann::json::parse(in);
  CHECK(summary["best"]["params"]["lr"].is_number_float());
  CHECK(summary["best"]["params"]["units"].is_number_integer());
}

// A repeated genome's row: status cached, the trial it repeats, its result; a resumed log counts
// it as logged but not as a result of its own (a replay makes it again).
TEST_CASE("a cached trial is a row of its own but no result to replay", "[hpo][trial_log][cache]") {
  strata::testing::TempDir dir;
  SearchSpace space;
  space.params.push_back({"units", ParamKind::integer, 1, 2, {}});
  Trial original;
  original.id = 0;
  original.genome = {2};
  original.fitness = 0.75;
  original.reported = true;
  Trial copy = original;
  copy.id = 1;
  copy.copy_of = 0;
  {
    TrialLog log(dir.str(), space);
    TrialOutcome ok;
    ok.fitness = 0.75;
    log.append(original, ok);
    log.append(copy, TrialLog::cached_outcome(copy, original));
    CHECK(log.has(1));
    CHECK_FALSE(log.has(2));
  }
  const auto rows = lines_of(dir.file("trials.jsonl"));
  REQUIRE(rows.size() == 2);
  const auto row = nlohmann::json::parse(rows[1]);
  CHECK(row["status"] == "cached");
  CHECK(row["reason"] == "repeats trial 0");
  CHECK(row["fitness"] == 0.75);
  CHECK(row["member_group"] == -1);
  TrialLog resumed(dir.str(), space, true);
  CHECK(resumed.recovered() == std::vector<TrialResult>{{0, 0.75}});
  CHECK(resumed.has(0));
  CHECK(resumed.has(1));
}
