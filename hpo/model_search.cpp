#include "hpo/model_search.hpp"

#include "hpo/bad_setting.hpp"

#include <algorithm>
#include <utility>

namespace strata {

namespace {
// The coordinate after the stream's purpose that the startup design draws from; proposals use
// their own index there, which never reaches it.
constexpr std::uint64_t design_stream = ~std::uint64_t{0};
}  // namespace

void validate(const ModelSearchConfig& c, const char* search) {
  if (c.trials < 1) bad_setting(search, "trials", c.trials, "must be >= 1");
  if (c.startup < 1) bad_setting(search, "startup", c.startup, "must be >= 1");
  if (c.slots < 1) bad_setting(search, "slots", c.slots, "must be >= 1");
}

ModelSearch::ModelSearch(SearchSpace space, const ModelSearchConfig& config, ModelSearchDraws draws)
    : Search(std::move(space), config.direction, {0, config.max_epochs, config.target}),
      settings_(config),
      draws_(draws) {}

std::vector<Search::Proposal> ModelSearch::propose(int max_count) {
  if (max_count < 1 || !finished_reason().empty()) return {};
  Rng rng(derive_seed(settings_.seed,
                      {seed_hpo, draws_.stream, static_cast<std::uint64_t>(proposed_)}));
  ++proposed_;
  const int generation = read_ / settings_.slots;
  const bool model = read_ >= settings_.startup &&
                     std::any_of(trials().begin(), trials().end(), [](const Trial& t) {
                       return t.reported && !t.failed && !t.cached();
                     });
  if (model) return {{model_proposal(rng), generation, 0, 1.0}};
  if (draws_.latin_startup && proposed_ <= settings_.startup) {
    // The whole design from one stream, so that each startup trial is its row of the same design.
    Rng design_rng(derive_seed(settings_.seed, {seed_hpo, draws_.stream, design_stream}));
    return {{latin_hypercube(space(), settings_.startup, design_rng)[proposed_ - 1], generation, 0,
             1.0}};
  }
  return {{sample(space(), rng), generation, 0, 1.0}};
}

void ModelSearch::absorb(std::span<const Trial> batch) {
  for (const Trial& t : batch) {
    ++read_;
    since_line_.push_back(t);
  }
  const bool last = outstanding() == 0 && (limits_reached() || !finished_reason().empty());
  if (static_cast<int>(since_line_.size()) >= settings_.slots || (last && !since_line_.empty())) {
    std::vector<double> fitness;
    for (const Trial& t : since_line_) fitness.push_back(t.fitness);
    record_generation(static_cast<int>(history().size()), fitness, since_line_);
    since_line_.clear();
  }
}

std::string ModelSearch::finished_reason() const {
  return proposed_ >= settings_.trials ? "exhausted" : "";
}

}  // namespace strata
