// The batch protocol shared by all searches, and the genetic, random and grid algorithms.
#include "hpo/search.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "hpo/bad_setting.hpp"
#include "hpo/breeding.hpp"

namespace strata {

// ---- Search: the protocol --------------------------------------------------------------------

Search::Search(SearchSpace space, Direction direction, SearchLimits limits)
    : space_(std::move(space)), direction_(direction), limits_(limits) {
  validate(space_);
  if (limits_.max_trainings < 0)
    bad_setting("search", "max_trainings", limits_.max_trainings, "must be >= 0");
  if (limits_.max_epochs < 0)
    bad_setting("search", "max_epochs", limits_.max_epochs, "must be >= 0");
  if (limits_.target && !std::isfinite(*limits_.target))
    bad_setting("search", "target", *limits_.target, "must be a finite number");
}

bool TrialResult::operator==(const TrialResult& other) const {
  // NaN (failed) equals NaN here: the journal's records, not arithmetic.
  return trial_id == other.trial_id && epochs == other.epochs &&
         (fitness == other.fitness || (std::isnan(fitness) && std::isnan(other.fitness)));
}

bool Search::limits_reached() const {
  return trainings_to_target_.has_value() ||
         (limits_.max_trainings > 0 && handed_out_ >= limits_.max_trainings) ||
         (limits_.max_epochs > 0 && epochs_ >= limits_.max_epochs);
}

std::vector<Trial> Search::admit(std::vector<Proposal> proposals) {
  std::vector<Trial> trainings;
  std::vector<int> copies;
  for (auto& p : proposals) {
    Trial t;
    t.id = static_cast<int>(trials_.size());
    t.generation = p.generation;
    t.deme = p.deme;
    t.step = p.step;
    t.genome = std::move(p.genome);
    // The same training twice would cost an allocation's time for the same result.
    const auto [first, is_new] = first_with_genome_.try_emplace(clamp(space_, t.genome), t.id);
    if (is_new) {
      t.training = handed_out_++;
      trainings.push_back(t);
    } else {
      t.copy_of = first->second;
      copies.push_back(t.id);
    }
    trials_.push_back(std::move(t));
  }
  outstanding_ += static_cast<int>(trainings.size());
  for (const int id : copies) {
    Trial& copy = trials_[static_cast<std::size_t>(id)];
    const Trial& original = trials_[static_cast<std::size_t>(copy.copy_of)];
    if (original.reported)
      resolve_copy(copy, original);
    else
      copies_waiting_[original.id].push_back(id);
  }
  return trainings;
}

void Search::fill_slots() {
  while (outstanding_ < concurrent_trainings() && !limits_reached()) {
    auto proposals = propose(1);
    if (proposals.empty()) {
      if (finished_reason().empty())
        throw std::logic_error("search: the algorithm proposed nothing but has not finished");
      return;
    }
    for (const Trial& t : admit(std::move(proposals))) ready_.push_back(t.id);
  }
}

std::vector<Trial> Search::next_batch() {
  if (concurrent_trainings() > 0) {
    fill_slots();
    std::vector<Trial> batch;
    for (const int id : ready_) batch.push_back(trials_[static_cast<std::size_t>(id)]);
    ready_.clear();
    return batch;
  }
  // A batch of nothing but repeats of reported trials completes here: propose again.
  while (true) {
    if (done() || limits_reached() || (outstanding_ > 0 && waits_for_results())) return {};
    // limits_reached() leaves room for at least one more training.
    int room = std::numeric_limits<int>::max();
    if (limits_.max_trainings > 0) room = limits_.max_trainings - handed_out_;
    auto proposals = propose(room);
    if (proposals.empty()) {
      if (finished_reason().empty())
        throw std::logic_error("search: the algorithm proposed nothing but has not finished");
      return {};
    }
    if (proposals.size() > static_cast<std::size_t>(room)) proposals.resize(room);
    auto batch = admit(std::move(proposals));
    batch_ends_.push_back(trials_.size());
    absorb_complete_batches();
    if (!batch.empty()) return batch;
  }
}

std::vector<Trial> Search::take_cached() {
  std::vector<Trial> out;
  for (const int id : cached_resolved_) out.push_back(trials_[static_cast<std::size_t>(id)]);
  cached_resolved_.clear();
  return out;
}

void Search::resolve_copy(Trial& copy, const Trial& original) {
  copy.reported = true;
  copy.failed = original.failed;
  copy.fitness = original.fitness;
  ++cached_;
  cached_resolved_.push_back(copy.id);
}

void Search::report(int trial_id, double fitness, bool failed, int epochs) {
  // Every trial before the oldest unread batch is reported: the check below names it.
  if (trial_id < 0 || trial_id >= static_cast<int>(trials_.size()))
    throw std::invalid_argument(fmt::format("search: trial {} was not handed out", trial_id));
  auto& t = trials_[static_cast<std::size_t>(trial_id)];
  if (t.cached())
    throw std::invalid_argument(fmt::format(
        "search: trial {} repeats trial {} and was not handed out", trial_id, t.copy_of));
  if (t.reported)
    throw std::invalid_argument(fmt::format("search: trial {} is reported twice", trial_id));
  t.reported = true;
  t.failed = failed || !std::isfinite(fitness);
  t.fitness = t.failed ? std::numeric_limits<double>::quiet_NaN() : fitness;
  t.epochs = std::max(epochs, 0);
  epochs_ += t.epochs;
  ++reported_;
  --outstanding_;
  read_order_.push_back(trial_id);
  if (const auto waiting = copies_waiting_.find(trial_id); waiting != copies_waiting_.end()) {
    for (const int id : waiting->second) resolve_copy(trials_[static_cast<std::size_t>(id)], t);
    copies_waiting_.erase(waiting);
  }
  if (concurrent_trainings() == 0) {
    absorb_complete_batches();
    return;
  }
  // A repeat takes its original's result but is no new information: only the training is read.
  note_result(t);
  absorb(std::span<const Trial>(&t, 1));
  fill_slots();
}

void Search::note_result(const Trial& t) {
  if (best_id_ < 0 ? !t.failed : better(t.fitness, trials_[best_id_].fitness, direction_))
    best_id_ = t.id;
  // A cached trial meets the target only after its original did. A steady state reads results as
  // they come: the trainings it took are those read so far.
  if (!trainings_to_target_ && !t.cached() && meets_target(t.fitness))
    trainings_to_target_ = concurrent_trainings() > 0 ? reported_ : t.training + 1;
}

void Search::absorb_complete_batches() {
  // Read every batch that is complete, oldest first, each in id order, whatever order it arrived
  // in: a later batch may be complete before an earlier one.
  while (!batch_ends_.empty()) {
    const std::size_t end = batch_ends_.front();
    for (std::size_t i = batch_begin_; i < end; ++i)
      if (!trials_[i].reported) return;
    std::span<const Trial> batch(trials_.data() + batch_begin_, end - batch_begin_);
    for (const auto& b : batch) note_result(b);
    absorb(batch);
    batch_begin_ = end;
    batch_ends_.pop_front();
  }
}

void Search::save_state(StateDict& out, const std::string& prefix) const {
  // Doubles as JSON numbers keep every bit (shortest round-trip form); failures are null.
  // Cached trials are not results: a replay makes them again from their originals.
  nlohmann::json results = nlohmann::json::array();
  for (const int id : read_order_) {
    const Trial& t = trials_[static_cast<std::size_t>(id)];
    results.push_back({t.id, t.failed ? nlohmann::json() : nlohmann::json(t.fitness), t.epochs});
  }
  out.put_text(prefix + "/results", results.dump());
  out.put_int(prefix + "/reported", reported_);
}

void Search::load_state(const StateDict& in, const std::string& prefix) {
  replay(results_of(in, prefix));
}

std::vector<TrialResult> Search::results_of(const StateDict& in, const std::string& prefix) {
  const auto results = nlohmann::json::parse(in.get_text(prefix + "/results"), nullptr, false);
  if (results.is_discarded() || !results.is_array())
    throw DataError(fmt::format("{}/results is not a JSON array of results", prefix));
  std::vector<TrialResult> out;
  std::set<int> seen;
  for (const auto& r : results) {
    // [id, fitness] before epochs were counted; [id, fitness, epochs] since.
    if (!r.is_array() || r.size() < 2 || r.size() > 3 || !r[0].is_number_integer() ||
        (r.size() == 3 && !r[2].is_number_integer()))
      throw DataError(fmt::format("{}/results holds a malformed entry {}", prefix, r.dump()));
    const int id = r[0].get<int>();
    if (!seen.insert(id).second)
      throw DataError(fmt::format("{}/results holds trial {} twice", prefix, id));
    out.push_back({id,
                   r[1].is_number() ? r[1].get<double>() : std::numeric_limits<double>::quiet_NaN(),
                   r.size() == 3 ? r[2].get<int>() : 0});
  }
  if (static_cast<std::int64_t>(out.size()) != in.get_int(prefix + "/reported"))
    throw DataError(fmt::format("{}: {} results recorded but {} listed", prefix,
                                in.get_int(prefix + "/reported"), out.size()));
  return out;
}

void Search::replay(const std::vector<TrialResult>& results) {
  if (!trials_.empty()) throw std::logic_error("search: replay into a search that has started");
  std::size_t applied = 0;
  while (true) {
    bool progressed = !next_batch().empty();
    // Each result as soon as its trial exists: a steady-state search proposes as results are read.
    for (; applied < results.size(); ++applied, progressed = true) {
      const auto [id, fitness, epochs] = results[applied];
      if (id < 0 || id >= static_cast<int>(trials_.size())) break;
      const Trial& t = trials_[static_cast<std::size_t>(id)];
      if (t.cached() || t.reported)
        throw DataError(fmt::format(
            "the search journal has a result for trial {}, which replaying this config {}: it was "
            "written by another search (config, seed or space)",
            id, t.cached() ? "makes a repeat of an earlier trial" : "has already read"));
      report(id, fitness, std::isnan(fitness), epochs);
    }
    if (!progressed) break;
  }
  if (applied != results.size())
    throw DataError(fmt::format(
        "the search journal has {} results, but replaying this config reaches only {} of them: "
        "it was written by another search (config, seed or space)",
        results.size(), applied));
}

std::vector<Trial> Search::unfinished() const {
  std::vector<Trial> out;
  for (const Trial& t : trials_)
    if (!t.reported && !t.cached()) out.push_back(t);
  return out;
}

bool Search::done() const {
  return outstanding_ == 0 && !stop_reason().empty();
}

std::string Search::stop_reason() const {
  if (outstanding_ > 0) return {};
  if (trainings_to_target_) return "target";
  if (limits_.max_trainings > 0 && reported_ >= limits_.max_trainings) return "max_trainings";
  if (limits_.max_epochs > 0 && epochs_ >= limits_.max_epochs) return "max_epochs";
  return finished_reason();
}

std::optional<Trial> Search::best() const {
  if (best_id_ < 0) return std::nullopt;
  return trials_[static_cast<std::size_t>(best_id_)];
}

std::vector<Trial> Search::top(int k) const {
  std::vector<Trial> ok;
  // A cached trial is its original again (no weights of its own): the original stands for both.
  for (const Trial& t : trials_)
    if (t.reported && !t.failed && !t.cached()) ok.push_back(t);
  std::stable_sort(ok.begin(), ok.end(), [&](const Trial& a, const Trial& b) {
    return better(a.fitness, b.fitness, direction_);
  });
  if (static_cast<int>(ok.size()) > k) ok.resize(static_cast<std::size_t>(std::max(k, 0)));
  return ok;
}

bool Search::meets_target(double fitness) const {
  if (!limits_.target || std::isnan(fitness)) return false;
  return direction_ == Direction::maximize ? fitness >= *limits_.target
                                           : fitness <= *limits_.target;
}

void Search::record_generation(int generation, std::span<const double> population,
                               std::span<const Trial> batch) {
  GenerationStats s;
  s.generation = generation;
  s.evaluated = static_cast<int>(batch.size());
  for (const auto& t : batch) s.failed += t.failed ? 1 : 0;
  double sum = 0.0;
  int ok = 0;
  for (double f : population) {
    if (std::isnan(f)) continue;
    sum += f;
    ++ok;
    if (better(f, s.best, direction_)) s.best = f;
  }
  if (ok > 0) s.mean = sum / ok;
  if (best_id_ >= 0) s.best_so_far = trials_[static_cast<std::size_t>(best_id_)].fitness;
  // Trainings up to the batch's last one, not the reports so far: those may include later batches
  // that overlap. A steady state reads results as they come: the reports so far are its count.
  s.trainings = reported_;
  if (concurrent_trainings() == 0)
    for (auto t = batch.rbegin(); t != batch.rend(); ++t)
      if (!t->cached()) {
        s.trainings = t->training + 1;
        break;
      }
  history_.push_back(s);
}

// ---- GeneticSearch -----------------------------------------------------------------------------

void validate(const GeneticConfig& c) {
  const char* ga = "genetic search";
  if (c.population < 1) bad_setting(ga, "population", c.population, "must be >= 1");
  if (c.demes < 1) bad_setting(ga, "demes", c.demes, "must be >= 1");
  const int smallest = c.population / c.demes;
  if (c.elitism < 0) bad_setting(ga, "elitism", c.elitism, "must be >= 0");
  if (smallest < c.elitism + 1)
    bad_setting(ga, "population", c.population,
                "each deme needs more individuals than elitism, to breed at least one");
  if (c.generations < 1) bad_setting(ga, "generations", c.generations, "must be >= 1");
  if (c.tournament < 1) bad_setting(ga, "tournament", c.tournament, "must be >= 1");
  if (!(c.crossover_rate >= 0.0 && c.crossover_rate <= 1.0))
    bad_setting(ga, "crossover_rate", c.crossover_rate, "must be in [0, 1]");
  if (!(c.blend_alpha >= 0.0 && std::isfinite(c.blend_alpha)))
    bad_setting(ga, "blend_alpha", c.blend_alpha, "must be >= 0");
  if (!(c.mutation_sigma >= 0.0 && std::isfinite(c.mutation_sigma)))
    bad_setting(ga, "mutation_sigma", c.mutation_sigma, "must be >= 0");
  if (!(c.mutation_rate >= 0.0 && c.mutation_rate <= 1.0))
    bad_setting(ga, "mutation_rate", c.mutation_rate, "must be in [0, 1]");
  if (!(c.mutation_probability >= 0.0 && c.mutation_probability <= 1.0))
    bad_setting(ga, "mutation_probability", c.mutation_probability, "must be in [0, 1]");
  if (!(c.mutation_decay > 0.0 && c.mutation_decay <= 1.0))
    bad_setting(ga, "mutation_decay", c.mutation_decay, "must be in (0, 1]");
  if (!(c.step_adaptation >= 0.0 && std::isfinite(c.step_adaptation)))
    bad_setting(ga, "step_adaptation", c.step_adaptation, "must be >= 0");
  if (c.migration_interval < 0)
    bad_setting(ga, "migration_interval", c.migration_interval, "must be >= 0");
  if (c.migrants < 0 || c.migrants > smallest)
    bad_setting(ga, "migrants", c.migrants, "must be between 0 and the size of the smallest deme");
  if (c.patience < 0) bad_setting(ga, "patience", c.patience, "must be >= 0");
  if (c.slots < 1) bad_setting(ga, "slots", c.slots, "must be >= 1");
  if (c.surrogate_candidates < 0)
    bad_setting(ga, "surrogate_candidates", c.surrogate_candidates, "must be >= 0");
  if (c.schedule == GeneticSchedule::asynchronous && c.demes != 1)
    bad_setting(ga, "demes", c.demes,
                "the asynchronous schedule keeps one steady-state population: demes must be 1");
}

namespace {

SearchLimits genetic_limits(const GeneticConfig& c) {
  validate(c);
  return {c.max_trainings, c.max_epochs, c.target};
}

}  // namespace

GeneticSearch::GeneticSearch(SearchSpace space, GeneticConfig config)
    : Search(std::move(space), config.direction, genetic_limits(config)),
      config_(config),
      demes_(static_cast<std::size_t>(config.demes)),
      next_(static_cast<std::size_t>(config.demes)) {}

int GeneticSearch::deme_size(int deme) const {
  return config_.population / config_.demes + (deme < config_.population % config_.demes ? 1 : 0);
}

std::vector<Search::Proposal> GeneticSearch::propose(int max_count) {
  if (!finished_reason().empty()) return {};
  std::vector<Proposal> out;
  for (int d = 0; d < config_.demes; ++d) {
    // One stream per generation and deme: breeding reads only the completed population.
    Rng rng(
        derive_seed(config_.seed, {seed_hpo, hpo_genetic, static_cast<std::uint64_t>(generation_),
                                   static_cast<std::uint64_t>(d)}));
    auto& next = next_[static_cast<std::size_t>(d)];
    next.clear();
    if (generation_ == 0) {
      for (int i = 0; i < deme_size(d); ++i) out.push_back({sample(space(), rng), 0, d, 1.0});
      continue;
    }
    const auto& deme = demes_[static_cast<std::size_t>(d)];
    const auto fitness = fitnesses_of(deme);
    for (auto i : elites(fitness, std::min<int>(config_.elitism, static_cast<int>(deme.size())),
                         config_.direction))
      next.push_back(deme[i]);
    const int children = deme_size(d) - static_cast<int>(next.size());
    const MutationSettings mutation{
        config_.mutation_probability,
        scheduled_sigma(config_.mutation_sigma, config_.mutation_decay, generation_),
        config_.mutation_rate, step_tau(config_.step_adaptation, space().params.size())};
    if (config_.surrogate_candidates > 1) {
      // One model per generation, of every result so far.
      const TpeModel model(space(), trials(), config_.direction, TpeConfig{});
      if (!model.empty()) {
        for (int i = 0; i < children; ++i) {
          auto child = breed_screened(deme, config_, mutation, space(), model,
                                      config_.surrogate_candidates, rng);
          out.push_back({std::move(child.genome), generation_, d, child.step});
        }
        continue;
      }
    }
    const auto parents = select_tournament(fitness, config_.tournament, children + children % 2,
                                           config_.direction, rng);
    for (int i = 0; i < children; i += 2) {
      auto [c1, c2] = mate(deme[parents[i]], deme[parents[i + 1]], config_.crossover_rate,
                           config_.blend_alpha, space(), rng);
      c1 = maybe_mutate(std::move(c1), mutation, space(), rng);
      c2 = maybe_mutate(std::move(c2), mutation, space(), rng);
      out.push_back({std::move(c1.genome), generation_, d, c1.step});
      if (i + 1 < children) out.push_back({std::move(c2.genome), generation_, d, c2.step});
    }
  }
  // Beyond max_trainings the last generation is cut short; the search stops after it.
  if (out.size() > static_cast<std::size_t>(max_count)) out.resize(max_count);
  return out;
}

void GeneticSearch::absorb(std::span<const Trial> batch) {
  for (const auto& t : batch)
    next_[static_cast<std::size_t>(t.deme)].push_back({t.genome, t.fitness, t.id, t.step});
  std::swap(demes_, next_);
  for (auto& n : next_) n.clear();

  std::vector<double> population;
  for (const auto& deme : demes_)
    for (const auto& ind : deme) population.push_back(ind.fitness);
  record_generation(generation_, population, batch);

  stall_.record(history().back().best, config_.direction);

  // A generation cut short by max_trainings is the last, and its demes may be too small to migrate.
  bool whole = true;
  for (int d = 0; d < config_.demes; ++d)
    whole = whole && static_cast<int>(demes_[static_cast<std::size_t>(d)].size()) == deme_size(d);
  if (whole && config_.demes > 1 && config_.migration_interval > 0 &&
      (generation_ + 1) % config_.migration_interval == 0)
    migrate_ring(demes_, config_.migrants, config_.direction);
  ++generation_;
}

std::string GeneticSearch::finished_reason() const {
  if (generation_ >= config_.generations) return "generations";
  if (config_.patience > 0 && stall_.generations() >= config_.patience) return "patience";
  return {};
}

// ---- RandomSearch ------------------------------------------------------------------------------

namespace {

SearchLimits random_limits(const RandomConfig& c) {
  if (c.trials < 1) bad_setting("random search", "trials", c.trials, "must be >= 1");
  if (c.batch_size < 1) bad_setting("random search", "batch_size", c.batch_size, "must be >= 1");
  return {0, c.max_epochs, c.target};
}

}  // namespace

RandomSearch::RandomSearch(SearchSpace space, RandomConfig config)
    : Search(std::move(space), config.direction, random_limits(config)), config_(config) {}

std::vector<Search::Proposal> RandomSearch::propose(int max_count) {
  const int count = std::min({config_.batch_size, config_.trials - issued_, max_count});
  std::vector<Proposal> out;
  for (int i = 0; i < count; ++i, ++issued_) {
    Rng rng(derive_seed(config_.seed, {seed_hpo, hpo_random, static_cast<std::uint64_t>(issued_)}));
    out.push_back({sample(space(), rng), issued_ / config_.batch_size, 0, 1.0});
  }
  return out;
}

void RandomSearch::absorb(std::span<const Trial> batch) {
  std::vector<double> fitness;
  for (const auto& t : batch) fitness.push_back(t.fitness);
  record_generation(batch.front().generation, fitness, batch);
}

std::string RandomSearch::finished_reason() const {
  return issued_ >= config_.trials ? "exhausted" : "";
}

// ---- GridSearch --------------------------------------------------------------------------------

std::vector<std::vector<double>> grid_axes(const SearchSpace& space, int points_per_real,
                                           double max_points) {
  validate(space);
  if (points_per_real < 1)
    bad_setting("grid search", "points_per_real", points_per_real, "must be >= 1");
  double total = 1.0;
  for (const auto& p : space.params) {
    const bool real = p.kind == ParamKind::uniform || p.kind == ParamKind::log_uniform;
    total *= real ? points_per_real : cardinality(p);
  }
  if (total > max_points)
    throw std::invalid_argument(fmt::format(
        "grid search: the grid would have {} points, more than {}; use fewer points_per_real or "
        "narrower int ranges",
        total, max_points));
  std::vector<std::vector<double>> axes;
  for (const auto& p : space.params) {
    std::vector<double> axis;
    if (p.kind == ParamKind::uniform || p.kind == ParamKind::log_uniform) {
      const double a = to_search_scale(p, p.lo), b = to_search_scale(p, p.hi);
      for (int i = 0; i < points_per_real; ++i) {
        const double t =
            points_per_real == 1 ? 0.5 : static_cast<double>(i) / (points_per_real - 1);
        // The end points exactly: exp(log(lo)) need not give lo back.
        if (points_per_real > 1 && i == 0)
          axis.push_back(p.lo);
        else if (points_per_real > 1 && i == points_per_real - 1)
          axis.push_back(p.hi);
        else
          axis.push_back(clamp_value(p, from_search_scale(p, a + (b - a) * t)));
      }
    } else {
      const double first = p.kind == ParamKind::integer ? p.lo : 0.0;
      for (double v = 0; v < cardinality(p); ++v) axis.push_back(first + v);
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

namespace {

SearchLimits grid_limits(const GridConfig& c) {
  if (c.batch_size < 1) bad_setting("grid search", "batch_size", c.batch_size, "must be >= 1");
  return {c.max_trainings, c.max_epochs, c.target};
}

}  // namespace

GridSearch::GridSearch(SearchSpace space, GridConfig config)
    : Search(std::move(space), config.direction, grid_limits(config)),
      config_(config),
      axes_(grid_axes(this->space(), config.points_per_real)) {
  size_ = 1;
  for (const auto& a : axes_) size_ *= static_cast<std::int64_t>(a.size());
}

std::vector<Search::Proposal> GridSearch::propose(int max_count) {
  const auto count = std::min<std::int64_t>({config_.batch_size, size_ - issued_, max_count});
  std::vector<Proposal> out;
  for (std::int64_t i = 0; i < count; ++i, ++issued_) {
    Genome g(axes_.size());
    auto rest = issued_;
    for (std::size_t p = axes_.size(); p-- > 0;) {
      const auto n = static_cast<std::int64_t>(axes_[p].size());
      g[p] = axes_[p][static_cast<std::size_t>(rest % n)];
      rest /= n;
    }
    out.push_back({std::move(g), static_cast<int>(issued_ / config_.batch_size), 0, 1.0});
  }
  return out;
}

void GridSearch::absorb(std::span<const Trial> batch) {
  std::vector<double> fitness;
  for (const auto& t : batch) fitness.push_back(t.fitness);
  record_generation(batch.front().generation, fitness, batch);
}

std::string GridSearch::finished_reason() const {
  return issued_ >= size_ ? "exhausted" : "";
}

}  // namespace strata
