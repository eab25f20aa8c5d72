// The trainer's one state door: weights, optimizer, position in the data and the last epoch's
// metrics, saved and restored independently of the decomposition.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/trainer.hpp"

namespace strata {

void Trainer::save_state(StateDict& out) {
  settle_host();
  write_state(out);
}

std::function<void(StateDict&)> Trainer::save_state_in_flight(StateDict& out) {
  std::shared_ptr<StateCopy> copy;
  if (engine_ahead_) copy = engine_->start_state_copy(replica_params_.front(), *optimizer_);
  if (copy == nullptr) {
    save_state(out);
    return {};
  }
  write_state(out);
  std::vector<std::pair<std::string, const Tensor*>> keyed;
  for (const Param& p : replicas_.front().params())
    keyed.emplace_back(Model::state_key("weights", p), p.value);
  for (auto& entry : optimizer_->buffer_keys("optimizer", replica_params_.front()))
    keyed.push_back(std::move(entry));
  return [copy, keyed = std::move(keyed)](StateDict& state) {
    copy->wait();
    for (const auto& [key, host] : keyed) {
      const std::span<const float> values = copy->values_of(host);
      std::vector<float>& into = state.tensors().at(key).values;
      if (values.size() != into.size())
        throw std::logic_error(
            fmt::format("state {}: {} values copied for {}", key, values.size(), into.size()));
      std::copy(values.begin(), values.end(), into.begin());
    }
  };
}

void Trainer::write_state(StateDict& out) {
  replicas_.front().save_state(out, "weights");
  optimizer_->save_state(out, "optimizer", replica_params_.front());
  const TrainPosition& p = position_;
  out.put_int("trainer/epoch", p.epoch);
  out.put_int("trainer/epoch_step", p.epoch_step);
  out.put_int("trainer/global_step", p.global_step);
  out.put_real("trainer/loss_sum", p.loss_sum);
  out.put_real("trainer/correct", p.correct);
  out.put_real("trainer/train_seconds", p.train_seconds);
  out.put_real("trainer/epoch_seconds", p.epoch_seconds);
  out.put_int("trainer/global_batch", global_batch_);
  out.put_int("trainer/steps_per_epoch", steps_per_epoch_);
  // Not restored (the data decides it); a transfer from this checkpoint reads it.
  out.put_real("trainer/input_mean", data_.mean);
  out.put_real("trainer/input_stddev", data_.stddev);
  const EpochMetrics& e = last_epoch_;
  out.put_int("trainer/last_epoch/epoch", e.epoch);
  out.put_real("trainer/last_epoch/train_loss", e.train_loss);
  out.put_real("trainer/last_epoch/train_accuracy", e.train_accuracy);
  out.put_real("trainer/last_epoch/val_loss", e.val_loss);
  out.put_real("trainer/last_epoch/val_accuracy", e.val_accuracy);
  out.put_real("trainer/last_epoch/test_loss", e.test_loss);
  out.put_real("trainer/last_epoch/test_accuracy", e.test_accuracy);
  out.put_real("trainer/last_epoch/samples_per_s", e.samples_per_s);
  out.put_real("trainer/last_epoch/seconds", e.seconds);
  out.put_real("trainer/last_epoch/lr", e.lr);
  // The data order: epoch e visits shuffled_indices(seed e) from sample epoch_step x global batch.
  out.put_int("data/shuffle_key",
              static_cast<std::int64_t>(derive_seed(config_.run.seed, {seed_shuffle})));
  out.put_int("data/next_sample", p.epoch_step * global_batch_);
}

void Trainer::load_state(const StateDict& in) {
  const std::int64_t batch = in.get_int("trainer/global_batch");
  if (batch != global_batch_)
    throw DataError(fmt::format(
        "the checkpoint was trained with a global batch of {} samples, but this run's layout "
        "gives {} (with parallel.accumulate: auto the planner keeps the global batch on any "
        "number of ranks)",
        batch, global_batch_));
  if (in.get_int("trainer/steps_per_epoch") != steps_per_epoch_)
    throw DataError(fmt::format("the checkpoint has {} steps per epoch, this run's data {}",
                                in.get_int("trainer/steps_per_epoch"), steps_per_epoch_));
  if (in.get_int("data/shuffle_key") !=
      static_cast<std::int64_t>(derive_seed(config_.run.seed, {seed_shuffle})))
    throw DataError("the checkpoint was written with another run.seed");
  for (auto& replica : replicas_) replica.load_state(in, "weights");
  optimizer_->load_state(in, "optimizer", replica_params_.front());
  // What an engine held is stale now: it takes the loaded state before its next step.
  engine_ahead_ = false;
  host_changed_ = true;
  TrainPosition p;
  p.epoch = static_cast<int>(in.get_int("trainer/epoch"));
  p.epoch_step = in.get_int("trainer/epoch_step");
  p.global_step = in.get_int("trainer/global_step");
  p.loss_sum = in.get_real("trainer/loss_sum");
  p.correct = in.get_real("trainer/correct");
  p.train_seconds = in.get_real("trainer/train_seconds");
  p.epoch_seconds = in.get_real("trainer/epoch_seconds");
  if (p.epoch < 1 || p.epoch_step < 0 || p.epoch_step > steps_per_epoch_ ||
      p.global_step != (p.epoch - 1) * steps_per_epoch_ + p.epoch_step)
    throw DataError(
        fmt::format("the checkpoint's position (epoch {}, step {}, global step {}) "
                    "is inconsistent",
                    p.epoch, p.epoch_step, p.global_step));
  position_ = p;
  EpochMetrics e;
  e.epoch = static_cast<int>(in.get_int("trainer/last_epoch/epoch"));
  e.train_loss = in.get_real("trainer/last_epoch/train_loss");
  e.train_accuracy = in.get_real("trainer/last_epoch/train_accuracy");
  e.val_loss = in.get_real("trainer/last_epoch/val_loss");
  e.val_accuracy = in.get_real("trainer/last_epoch/val_accuracy");
  e.test_loss = in.get_real("trainer/last_epoch/test_loss");
  e.test_accuracy = in.get_real("trainer/last_epoch/test_accuracy");
  e.samples_per_s = in.get_real("trainer/last_epoch/samples_per_s");
  e.seconds = in.get_real("trainer/last_epoch/seconds");
  e.lr = in.get_real("trainer/last_epoch/lr");
  last_epoch_ = e;
}

}  // namespace strata
