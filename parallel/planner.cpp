#include "parallel/planner.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

namespace {

std::string mib(std::int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

int choose_model(const PlanRequest& r, std::vector<std::string>& reasons) {
  const int n = r.world_size;
  if (r.fixed_model > 0) {
    if (n % r.fixed_model != 0)
      throw ConfigError(
          fmt::format("parallel.model: {} ranks cannot be split into model groups of {} shards ({} "
                      "is not a multiple of {})",
                      n, r.fixed_model, n, r.fixed_model));
    reasons.push_back(fmt::format("M = {}: fixed by parallel.model", r.fixed_model));
    return r.fixed_model;
  }
  if (r.memory_per_rank_bytes <= 0 || r.model_bytes <= r.memory_per_rank_bytes) {
    reasons.push_back(
        r.memory_per_rank_bytes <= 0
            ? std::string(
                  "M = 1: no parallel.memory_per_rank_mib limit, the whole model on each rank")
            : fmt::format("M = 1: the model's {} fit the {} per rank", mib(r.model_bytes),
                          mib(r.memory_per_rank_bytes)));
    return 1;
  }
  // Only the layers marked `split` shrink with M; the others stay whole on every shard.
  const std::int64_t whole = r.model_bytes - r.split_bytes;
  for (int m = 2; m <= n; ++m) {
    if (n % m != 0 || whole + r.split_bytes / m > r.memory_per_rank_bytes) continue;
    reasons.push_back(fmt::format(
        "M = {}: the smallest divisor of {} ranks at which a shard ({} = {} unsplit + {} split / "
        "M) fits {} per rank (checkpoints too: each shard writes its own slices)",
        m, n, mib(whole + r.split_bytes / m), mib(whole), mib(r.split_bytes),
        mib(r.memory_per_rank_bytes)));
    return m;
  }
  throw ConfigError(fmt::format(
      "parallel.memory_per_rank_mib: the model needs {}, which does not fit {} per rank even split "
      "{} ways: {} of it is in layers not marked `split`, which every shard holds whole",
      mib(r.model_bytes), mib(r.memory_per_rank_bytes), n, mib(whole)));
}

// `b` is what one replica contributes to the global batch per optimizer step: K x local batch.
int choose_data(const PlanRequest& r, int model, int bound, int b,
                std::vector<std::string>& reasons) {
  const int n = r.world_size;
  if (r.fixed_data > 0) {
    if (r.fixed_data * b > bound)
      throw ConfigError(
          fmt::format("parallel.data: {} replicas x {} samples per step = global batch {}, above "
                      "parallel.max_global_batch {}",
                      r.fixed_data, b, r.fixed_data * b, bound));
    if (n % (r.fixed_data * model) != 0)
      throw ConfigError(fmt::format(
          "parallel.data: {} ranks cannot be split into groups of D x M = {} x {} = {} ranks", n,
          r.fixed_data, model, r.fixed_data * model));
    if (r.one_group && n != r.fixed_data * model)
      throw ConfigError(fmt::format(
          "parallel.layout: data puts every rank into one training, but parallel.data fixes D x M "
          "= {} x {} = {} ranks, not {} (or leave parallel.data out)",
          r.fixed_data, model, r.fixed_data * model, n));
    reasons.push_back(fmt::format("D = {}: fixed by parallel.data", r.fixed_data));
    return r.fixed_data;
  }
  if (r.one_group) {
    const int d = n / model;
    if (d * b > bound)
      throw ConfigError(fmt::format(
          "parallel.layout: data puts every rank into one training: D = {} ranks / M = {} = {} "
          "replicas x {} samples per step = global batch {}, above parallel.max_global_batch {} "
          "(or raise max_global_batch, or use layout: members for more trainings)",
          n, model, d, b, d * b, bound));
    reasons.push_back(fmt::format(
        "D = {}: parallel.layout: data gives every rank to one training ({} x {} <= {})", d, d, b,
        bound));
    return d;
  }
  int best = 1;
  for (int d = 1; d * b <= bound && d * model <= n; ++d)
    if (n % (d * model) == 0) best = d;
  reasons.push_back(
      fmt::format("D = {}: the largest D with D x {} <= {} and D x M = {} dividing {} ranks", best,
                  b, bound, best * model, n));
  return best;
}

Plan plan_for(const PlanRequest& r);

// "; the nearest rank counts that work are 4 and 8" for a request that fails on its world size
// alone: the closest counts below and above for which the whole plan succeeds (so a fixed D and M
// together, or parallel.layout: data, are honoured); empty when none is near.
std::string nearest_rank_counts(const PlanRequest& r) {
  auto works = [&](int n) {
    PlanRequest other = r;
    other.world_size = n;
    try {
      plan_for(other);
      return true;
    } catch (const ConfigError&) {
      return false;
    }
  };
  constexpr int reach = 4096;
  int below = 0, above = 0;
  for (int n = r.world_size - 1; n >= 1 && n >= r.world_size - reach && below == 0; --n)
    if (works(n)) below = n;
  for (int n = r.world_size + 1; n <= r.world_size + reach && above == 0; ++n)
    if (works(n)) above = n;
  if (below > 0 && above > 0)
    return fmt::format("; the nearest rank counts that work are {} and {}", below, above);
  if (below > 0 || above > 0)
    return fmt::format("; the nearest rank count that works is {}", below > 0 ? below : above);
  return "";
}

}  // namespace

Plan make_plan(const PlanRequest& r) {
  try {
    return plan_for(r);
  } catch (const ConfigError& e) {
    throw ConfigError(e.what() + nearest_rank_counts(r));
  }
}

namespace {

Plan plan_for(const PlanRequest& r) {
  if (r.world_size < 1)
    throw ConfigError(fmt::format("the world has {} ranks; it needs at least 1", r.world_size));
  if (r.local_batch < 1)
    throw ConfigError(
        fmt::format("training.local_batch: {} is not a positive batch size", r.local_batch));
  const int bound = r.max_global_batch > 0 ? r.max_global_batch : r.local_batch;
  if (r.local_batch > bound)
    throw ConfigError(
        fmt::format("parallel.max_global_batch: {} is smaller than training.local_batch {}; one "
                    "replica alone exceeds the bound",
                    bound, r.local_batch));
  Plan plan;
  plan.world_size = r.world_size;
  plan.local_batch = r.local_batch;
  plan.max_global_batch = bound;
  plan.ranks_per_node = r.ranks_per_node > 0 ? r.ranks_per_node : r.world_size;
  plan.model = choose_model(r, plan.reasons);
  if (r.accumulate < 0)
    throw ConfigError(
        fmt::format("parallel.accumulate: {} is not a number of micro-batches", r.accumulate));
  const int fixed_k = r.accumulate > 0 ? r.accumulate : 1;
  if (fixed_k * r.local_batch > bound)
    throw ConfigError(
        fmt::format("parallel.accumulate: {} micro-batches x local batch {} = {}, above "
                    "parallel.max_global_batch {}",
                    fixed_k, r.local_batch, fixed_k * r.local_batch, bound));
  plan.data = choose_data(r, plan.model, bound, fixed_k * r.local_batch, plan.reasons);
  plan.accumulate = r.accumulate > 0 ? r.accumulate : bound / (plan.data * r.local_batch);
  if (r.accumulate > 1)
    plan.reasons.push_back(fmt::format("K = {}: fixed by parallel.accumulate", r.accumulate));
  else if (r.accumulate == 0)
    plan.reasons.push_back(fmt::format(
        "K = {}: accumulate micro-batches so that K x D x {} = {} comes as close to {} as it can",
        plan.accumulate, r.local_batch, plan.global_batch(), bound));
  plan.groups = r.world_size / (plan.data * plan.model);
  plan.reasons.push_back(fmt::format(
      "G = {}: {} ranks / (D x M = {}); extra ranks train more members, not a larger batch",
      plan.groups, r.world_size, plan.data * plan.model));
  return plan;
}

}  // namespace

std::string describe(const Plan& p, int max_groups_listed) {
  std::string text = fmt::format(
      "{} ranks = G {} member groups x D {} data replicas x M {} model shards; global batch {} "
      "(bound {}) per group{}\n",
      p.world_size, p.groups, p.data, p.model, p.global_batch(), p.max_global_batch,
      p.accumulate > 1 ? fmt::format(" in K = {} micro-batches", p.accumulate) : "");
  for (const auto& reason : p.reasons) text += "  " + reason + "\n";
  text +=
      fmt::format("layout: world_rank = m + M*d + M*D*g; {} ranks per node\n", p.ranks_per_node);
  for (int g = 0; g < p.groups && g < max_groups_listed; ++g) {
    const int first = p.world_rank({g, 0, 0}), last = first + p.group_size() - 1;
    const int first_node = p.node_of(first), last_node = p.node_of(last);
    text += fmt::format("  group {}: ranks {}-{} on node{} {}\n", g, first, last,
                        first_node == last_node ? "" : "s",
                        first_node == last_node ? fmt::format("{}", first_node)
                                                : fmt::format("{}-{}", first_node, last_node));
  }
  if (p.groups > max_groups_listed)
    text += fmt::format("  ... and {} more groups\n", p.groups - max_groups_listed);
  if (p.model > 1)
    text += p.model_groups_within_nodes()
                ? "  every replica's model shards share a node\n"
                : fmt::format(
                      "  warning: {} ranks per node is not a multiple of M = {}, so some replicas' "
                      "model "
                      "shards span two nodes and their collectives cross the network\n",
                      p.ranks_per_node, p.model);
  return text;
}

}  // namespace strata
