// The batch protocol shared by all searches: admitting proposals, cached copies, results, state.
#include "hpo/search.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "hpo/bad_setting.hpp"

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

}  // namespace strata
