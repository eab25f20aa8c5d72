// The tree-structured Parzen estimator as a search (Optuna's default sampler), over the same typed
// space as the genetic search, keeping one training in flight per member group.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpo/parzen.hpp"
#include "hpo/search.hpp"

namespace strata {

struct TpeConfig {
  int trials = 100;           // proposals in all, repeats included
  int startup = 10;           // random trials before the model
  int candidates = 24;        // draws from the good density per parameter
  double gamma = 0.1;         // the good fraction of the observations
  int max_good = 25;          // at most this many good observations
  double prior_weight = 1.0;  // of the wide prior component
  int slots = 1;              // trainings in flight, one per member group
  std::optional<double> target;
  Direction direction = Direction::maximize;
  std::uint64_t seed = 0;
  int max_epochs = 0;  // 0: no limit
};

// Throws std::invalid_argument naming the setting and its value.
void validate(const TpeConfig& config);

// One parameter's TPE choice: among `candidates` draws from the good density l (of `good`, in the
// parameter's search scale: log for log_uniform, the index for a choice), the one with the largest
// log l(x) - log g(x), g the density of `bad`. Integers are searched on [lo - 0.5, hi + 0.5] and
// rounded; the result is a legal gene.
double tpe_choose(const ParamSpec& spec, std::span<const double> good, std::span<const double> bad,
                  const TpeConfig& config, Rng& rng);

// Univariate TPE in the steady state: the first `startup` trials are random; after them each free
// slot gets a proposal from the densities of the good (the best gamma fraction, at most max_good)
// and the bad results so far. Trials still in flight count as bad (Optuna's constant liar), so
// that the groups given proposals at the same time do not all get the same one; failed trials are
// bad too. Like the asynchronous genetic search, what it proposes depends on the order results
// come in, which the journal keeps. History lines come every `slots` results.
class TpeSearch : public Search {
 public:
  TpeSearch(SearchSpace space, TpeConfig config);

  const TpeConfig& config() const { return config_; }

 private:
  int concurrent_trainings() const override { return config_.slots; }
  std::vector<Proposal> propose(int max_count) override;
  void absorb(std::span<const Trial> batch) override;
  std::string finished_reason() const override;

  Genome model_proposal(Rng& rng) const;

  TpeConfig config_;
  int proposed_ = 0;
  int read_ = 0;
  std::vector<Trial> since_line_;
};

}  // namespace strata
