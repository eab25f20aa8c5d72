#include "jobs/pbt_stage.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/rng.hpp"
#include "hpo/journal_rows.hpp"
#include "hpo/pbt.hpp"
#include "hpo/pbt_log.hpp"
#include "jobs/commands.hpp"
#include "jobs/fault_injection.hpp"
#include "jobs/group_training.hpp"
#include "jobs/hpo_trial.hpp"
#include "jobs/member_log.hpp"
#include "jobs/pbt_results.hpp"
#include "jobs/progress_board.hpp"
#include "jobs/run_output.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/training_session.hpp"
#include "parallel/state_exchange.hpp"

namespace strata {

namespace {

constexpr int exploit_tag = 7300;  // and the two after it (parallel/state_exchange)

// What a copy takes from the member it copies: weights, optimizer and position (the round's
// end, where both stand). Its data order (data/) stays its own.
const std::vector<std::string>& copied_prefixes() {
  static const std::vector<std::string> prefixes{"weights/", "optimizer/", "trainer/"};
  return prefixes;
}

class PbtRun {
 public:
  PbtRun(const StageContext& c, const HpoSpec& spec)
      : c_(c),
        spec_(spec),
        topology_(c.topology),
        space_{spec.space},
        rounds_((c.config.training.epochs + spec.interval - 1) / spec.interval),
        population_(space_, population_config()),
        data_(load_training_data(c.config)),
        dir_(c.config.output.dir) {}

  void run();

 private:
  PbtConfig population_config() const {
    PbtConfig p;
    p.population = spec_.population;
    p.quantile = spec_.quantile;
    p.resample_probability = spec_.resample_probability;
    p.direction = spec_.maximize ? Direction::maximize : Direction::minimize;
    p.seed = c_.seed;
    p.rounds = rounds_;
    return p;
  }
  int members() const { return spec_.population; }
  int groups() const { return topology_.plan().groups; }
  bool on_this_group(int member) const { return member % groups() == topology_.coords().group; }
  bool writes() const { return topology_.member().rank() == 0; }
  int end_epoch(int round) const {
    return std::min(round * spec_.interval, c_.config.training.epochs);
  }
  std::filesystem::path member_dir(int member) const {
    return dir_ / "members" / std::to_string(member);
  }
  std::filesystem::path exploited_marker() const {
    return dir_ / "checkpoints" / fmt::format("stage{}", c_.stage_index) / "pbt_exploited";
  }

  // The member's config with `genome`'s values and its own seed (initialisation, data order).
  Config member_config(int member, const Genome& genome) const {
    Config config = instantiate(c_.config, trial_values(space_, genome));
    config.run.seed = derive_seed(c_.seed, {seed_member, static_cast<std::uint64_t>(member)});
    return config;
  }
  SessionSettings session_settings(int member, const Config& config) const {
    SessionSettings s;
    s.checkpoint_dir = dir_ / "checkpoints" / fmt::format("stage{}", c_.stage_index) /
                       fmt::format("member{}", member);
    s.checkpoint = c_.config.checkpoint;
    s.epochs = config.training.epochs;
    s.label = fmt::format("member {}: ", member);
    s.meta.put_text("kind", "pbt");
    s.meta.put_int("stage", c_.stage_index);
    s.meta.put_int("member", member);
    s.trace = c_.trace;
    return s;
  }

  void resume();
  PbtMemberResult train(int member, int round, ProgressBoard& board, StateDict* state);
  StateDict checkpointed_state(int member, const Genome& genome);
  void exploit(const PbtRound& round, std::map<int, StateDict>& states);
  std::vector<PbtMemberResult> gather(std::vector<PbtMemberResult> mine) const;
  void say_round(const PbtRound& round, double seconds) const;

  const StageContext& c_;
  const HpoSpec& spec_;
  const Topology& topology_;
  SearchSpace space_;
  int rounds_;
  PbtPopulation population_;
  TrainingData data_;
  std::filesystem::path dir_;
  std::optional<PbtLog> log_;  // world rank 0
  int exploited_ = 0;          // the last round whose exploits are all written
};

// World rank 0 replays the journal; every rank then loads the same population through its state.
void PbtRun::resume() {
  std::string text, problem;
  if (topology_.world_rank() == 0) {
    try {
      log_.emplace(dir_, space_, members(), true);
      for (const auto& scores : log_->recovered()) population_.end_round(scores);
      log_->check_replay(population_);
      std::ifstream marker(exploited_marker());
      int exploited = 0;
      if (marker >> exploited) exploited_ = exploited;
      StateDict state;
      population_.save_state(state, "pbt");
      text = nlohmann::json{{"scores", state.get_text("pbt/scores")}, {"exploited", exploited_}}
                 .dump();
    } catch (const DataError& e) {
      problem = e.what();
    }
  }
  topology_.world().broadcast_string(problem, 0);
  if (!problem.empty()) throw DataError(problem);
  topology_.world().broadcast_string(text, 0);
  const auto resumed = nlohmann::json::parse(text);
  StateDict state;
  state.put_text("pbt/scores", resumed["scores"].get<std::string>());
  state.put_int("pbt/population", members());
  population_.load_state(state, "pbt");
  exploited_ = resumed["exploited"].get<int>();
  if (topology_.world_rank() == 0 && population_.round() > 1) {
    fmt::print("[resume] pbt: {} round(s) replayed from pbt.jsonl, now in round {}/{}\n",
               population_.round() - 1, std::min(population_.round(), rounds_), rounds_);
    std::fflush(stdout);
  }
}

PbtMemberResult PbtRun::train(int member, int round, ProgressBoard& board, StateDict* state) {
  const Config config =
      member_config(member, population_.genomes()[static_cast<std::size_t>(member)]);
  GroupTraining group(config, data_, topology_, plan_on_run_layout(config, topology_.plan()),
                      c_.threads, c_.trace);
  Trainer& trainer = *group.trainer;
  std::optional<RunOutput> output;
  if (writes()) output.emplace(RunOutput::inside_checked_run(member_dir(member)));
  const MemberLog log(writes() ? member_dir(member) / "log.txt" : std::filesystem::path(),
                      writes() && c_.verbose
                          ? std::optional(fmt::format("[g{}] ", topology_.coords().group))
                          : std::nullopt);
  SessionSettings settings = session_settings(member, config);
  settings.say = [&log](const std::string& line) { log.line(line); };
  StepWork work;
  work.serve = [&board] { board.poll(); };
  work.stop_elsewhere = [&board] { return board.stop_elsewhere(); };
  trainer.set_evaluation_hook([&board] { board.poll(); });
  TrainingSession session(trainer, topology_, c_.signals, settings, std::move(work));
  session.resume();
  if (output) output->keep_metrics_before(trainer.position().epoch);
  const int until = end_epoch(round);
  MemberReport report;
  report.member = member;
  report.group = topology_.coords().group;
  report.epochs = until;
  report.steps_per_epoch = trainer.steps_per_epoch();
  report.epoch = std::min(trainer.position().epoch, until);
  auto send = [&](MemberState s) {
    report.state = s;
    if (writes()) board.report(report);
  };
  send(MemberState::running);
  PbtMemberResult result;
  try {
    session.run(
        until,
        [&](const TrainProgress& p) {
          report.update(p);
          send(MemberState::running);
        },
        [&](const EpochMetrics& m) {
          report.update(m);
          send(MemberState::running);
          if (!output) return;
          output->append_metrics(m, trainer.device());
          log.line(
              fmt::format("[epoch {}/{}] round {} {} | train loss {:.4f} | val acc {:.4f} | "
                          "test acc {:.4f} | {:.1f}s",
                          m.epoch, config.training.epochs, round,
                          describe(space_, population_.genomes()[static_cast<std::size_t>(member)]),
                          m.train_loss, m.val_accuracy, m.test_accuracy, m.seconds));
        });
  } catch (const DivergedError& e) {
    // Every rank of the group saw the same loss: all leave here. A copy replaces it below.
    log.line(fmt::format("member {} diverged in round {}: {}", member, round, e.what()));
    session.wait();
    result.fitness = result.val_accuracy = result.test_accuracy =
        std::numeric_limits<double>::quiet_NaN();
    result.epochs = until;
    send(MemberState::done);
    return result;
  } catch (const Interrupted&) {
    send(MemberState::stopped);
    throw;
  }
  const EpochMetrics& m = trainer.last_epoch();
  result.fitness = spec_.fitness == "val_loss" ? m.val_loss : m.val_accuracy;
  result.val_accuracy = m.val_accuracy;
  result.test_accuracy = m.test_accuracy;
  result.epochs = m.epoch;
  if (state != nullptr) trainer.save_state(*state);
  if (round == rounds_) session.save_final_weights(member_dir(member) / "weights.h5");
  session.wait();
  report.update(m);
  send(MemberState::done);
  return result;
}

// A member's state as its newest checkpoint has it (the end of the round before a resumed
// exploit: no member trains on before every exploit of the round is written).
StateDict PbtRun::checkpointed_state(int member, const Genome& genome) {
  const Config config = member_config(member, genome);
  GroupTraining group(config, data_, topology_, plan_on_run_layout(config, topology_.plan()),
                      c_.threads, c_.trace);
  TrainingSession session(*group.trainer, topology_, nullptr, session_settings(member, config));
  if (!session.resume())
    throw DataError(fmt::format("pbt: member {} has no checkpoint to be copied from in {}", member,
                                session_settings(member, config).checkpoint_dir.string()));
  StateDict state;
  group.trainer->save_state(state);
  return state;
}

// Every copy of the round: each target receives its source's state from the source's group
// (the peers communicator links the ranks of equal (d, m) across groups), loads it with its new
// values and writes it as its newest checkpoint.
void PbtRun::exploit(const PbtRound& round, std::map<int, StateDict>& states) {
  const int mine = topology_.coords().group;
  struct Target {
    int member;
    Config config;
    std::optional<GroupTraining> training;
    StateDict state;
  };
  std::deque<Target> targets;
  std::vector<StateSend> sends;
  std::vector<StateReceive> receives;
  for (const PbtExploit& e : round.exploits) {
    const int source_group = e.source % groups(), target_group = e.target % groups();
    if (mine == source_group && source_group != target_group)
      sends.push_back({target_group, &states.at(e.source)});
    if (mine != target_group) continue;
    Target& t = targets.emplace_back();
    t.member = e.target;
    t.config = member_config(e.target, population_.genomes()[static_cast<std::size_t>(e.target)]);
    t.training.emplace(t.config, data_, topology_, plan_on_run_layout(t.config, topology_.plan()),
                       c_.threads, c_.trace);
    t.training->trainer->save_state(t.state);  // the layout, and its own data order
    if (source_group == target_group)
      copy_state_entries(states.at(e.source), t.state, copied_prefixes());
    else
      receives.push_back({source_group, &t.state});
  }
  {
    const TraceSpan span(c_.trace, "pbt exploit", "comm");
    exchange_states(topology_.peers(), sends, receives, copied_prefixes(), exploit_tag);
  }
  for (Target& t : targets) {
    t.training->trainer->load_state(t.state);
    TrainingSession session(*t.training->trainer, topology_, nullptr,
                            session_settings(t.member, t.config));
    session.checkpoint();
    session.wait();
  }
}

// Every member's result on every rank: each group fills its own members' entries, and the
// peers communicator (one rank per group) sums them.
std::vector<PbtMemberResult> PbtRun::gather(std::vector<PbtMemberResult> mine) const {
  std::vector<double> values(static_cast<std::size_t>(members()) * 4, 0.0);
  for (int m = 0; m < members(); ++m) {
    if (!on_this_group(m)) continue;
    const PbtMemberResult& r = mine[static_cast<std::size_t>(m)];
    const std::size_t at = static_cast<std::size_t>(m) * 4;
    values[at] = r.fitness;
    values[at + 1] = r.val_accuracy;
    values[at + 2] = r.test_accuracy;
    values[at + 3] = r.epochs;
  }
  topology_.peers().allreduce_sum(std::span<double>(values));
  std::vector<PbtMemberResult> all(static_cast<std::size_t>(members()));
  for (std::size_t m = 0; m < all.size(); ++m)
    all[m] = {values[m * 4], values[m * 4 + 1], values[m * 4 + 2],
              static_cast<int>(values[m * 4 + 3])};
  return all;
}

void PbtRun::say_round(const PbtRound& round, double seconds) const {
  const auto order = rank_order(round.scores, population_.config().direction);
  double sum = 0;
  int scored = 0;
  for (double s : round.scores) {
    if (std::isnan(s)) continue;
    sum += s;
    ++scored;
  }
  std::string copies;
  for (const PbtExploit& e : round.exploits)
    copies += fmt::format("{}{}<-{}", copies.empty() ? "" : ", ", e.target, e.source);
  fmt::print(
      "[pbt] round {}/{} (to epoch {}) in {:.1f}s: best {:.4g} (member {}), mean {:.4g}{}{}\n",
      round.round, rounds_, end_epoch(round.round), seconds, round.scores[order.front()],
      order.front(), scored > 0 ? sum / scored : std::nan(""),
      scored < members() ? fmt::format(", {} diverged", members() - scored) : "",
      copies.empty() ? "" : fmt::format("; copies (member<-member): {}", copies));
  std::fflush(stdout);
}

void PbtRun::run() {
  resume();
  if (topology_.world_rank() == 0)
    fmt::print(
        "[pbt] {} members on {} member groups, {} rounds of {} epoch(s); the worst {:.0f}% "
        "copy the best after each; training {}\n",
        members(), groups(), rounds_, spec_.interval, 100 * spec_.quantile,
        trainings_device(c_.config));
  const auto start = Clock::now();
  // A stop cut the last round's exploits short: the sources still stand at that round's end.
  if (population_.round() > 1 && exploited_ < population_.round() - 1 &&
      population_.round() - 1 < rounds_) {
    const PbtRound& last = population_.history().back();
    std::map<int, StateDict> states;
    for (const PbtExploit& e : last.exploits)
      if (on_this_group(e.source) && !states.contains(e.source))
        states[e.source] =
            checkpointed_state(e.source, last.genomes[static_cast<std::size_t>(e.source)]);
    exploit(last, states);
    topology_.world().barrier();
    if (topology_.world_rank() == 0)
      write_text_atomically(exploited_marker(), fmt::format("{}\n", last.round));
    topology_.world().barrier();
  }
  for (int round = population_.round(); round <= rounds_; ++round) {
    const auto round_start = Clock::now();
    ProgressBoard board(topology_, members(), c_.config.output.progress_seconds,
                        fmt::format("pbt round {}", round));
    std::vector<PbtMemberResult> mine(static_cast<std::size_t>(members()));
    std::map<int, StateDict> states;
    std::string stopped;
    try {
      for (int m = topology_.coords().group; m < members(); m += groups())
        mine[static_cast<std::size_t>(m)] =
            train(m, round, board, round < rounds_ ? &states[m] : nullptr);
    } catch (const Interrupted& e) {
      stopped = e.what();
    }
    if (topology_.world_rank() == 0) board.wait_for_all(c_.signals);
    // Every rank learns of a stop before the round's collectives, and leaves alike.
    if (topology_.world().allreduce_max(stopped.empty() ? 0 : 1) > 0)
      throw Interrupted(stopped.empty() ? std::string("pbt stopped on a signal") : stopped);
    const std::vector<PbtMemberResult> results = gather(std::move(mine));
    std::vector<double> scores;
    scores.reserve(results.size());
    for (const auto& r : results) scores.push_back(r.fitness);
    if (std::all_of(scores.begin(), scores.end(), [](double s) { return std::isnan(s); }))
      throw SearchFailed(fmt::format(
          "every one of the {} pbt members diverged in round {} (members/<m>/log.txt says where); "
          "lower the learning rate's range",
          members(), round));
    const PbtRound& ended = population_.end_round(scores);
    if (topology_.world_rank() == 0) {
      log_->append(population_, ended, results);
      say_round(ended, seconds_since(round_start));
    }
    if (round == rounds_) break;
    // The journal holds the round before any copy is made: a copy written before a kill that the
    // journal did not record would be scored as its target's own training.
    topology_.world().barrier();
    if (FaultPlan::from_environment().kill_before_exploit == round) std::raise(SIGKILL);
    exploit(ended, states);
    // No member trains on until every copy of the round is written: a resumed run can redo them.
    topology_.world().barrier();
    if (topology_.world_rank() == 0)
      write_text_atomically(exploited_marker(), fmt::format("{}\n", round));
    topology_.world().barrier();
  }
  if (topology_.world_rank() == 0)
    publish_pbt_results(c_.config, spec_, space_, population_, seconds_since(start));
  topology_.world().barrier();
}

}  // namespace

void pbt_stage(const StageContext& context, const HpoSpec& spec) {
  PbtRun(context, spec).run();
}

}  // namespace strata
