// Trains one model on one process: epochs of shuffled batches split over worker threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/config.hpp"
#include "core/gradient_sync.hpp"
#include "core/lr_schedule.hpp"
#include "core/model.hpp"
#include "core/optimizer.hpp"
#include "core/training_data.hpp"
#include "core/worker_pool.hpp"

namespace strata {

struct Evaluation {
  double loss = 0.0;
  double accuracy = 0.0;
  std::int64_t count = 0;
};

struct TrainProgress {
  int epoch = 0;  // 1-based
  int epochs = 0;
  std::int64_t step = 0;  // steps done in this epoch
  std::int64_t steps_per_epoch = 0;
  double loss = 0.0;  // mean training loss so far in this epoch
  double lr = 0.0;
  double samples_per_s = 0.0;
  double eta_seconds = 0.0;  // for the whole run
};

struct EpochMetrics {
  int epoch = 0;
  double train_loss = 0.0, train_accuracy = 0.0;
  double val_loss = 0.0, val_accuracy = 0.0;
  double test_loss = 0.0, test_accuracy = 0.0;
  double samples_per_s = 0.0;  // training steps only
  double seconds = 0.0;        // the whole epoch, evaluation included
  double lr = 0.0;             // at the epoch's last step
};

using ProgressCallback = std::function<void(const TrainProgress&)>;

class Trainer {
 public:
  // `threads` workers split every batch; each runs single-threaded kernels on its own model
  // replica. With `sync`, this process is replica sync->replica() of sync->replicas() data-parallel
  // replicas: each step takes its shard of a global batch of replicas x local_batch samples, and
  // the gradients are summed over the replicas before the (identical) optimizer step everywhere.
  // `layers` makes model-parallel layers; they communicate inside forward and backward, so a
  // trainer with such layers must run one worker thread (MPI is called from the main thread only).
  Trainer(const Config& config, const TrainingData& data, int threads, GradientSync* sync = nullptr,
          const LayerFactory& layers = {});

  // Runs epoch `epoch` (1-based) and evaluates on validation and test data.
  // Calls `on_progress` at most every output.progress_seconds. Throws DivergedError on a NaN/inf
  // loss.
  EpochMetrics run_epoch(int epoch, const ProgressCallback& on_progress);
  Evaluation evaluate(const SampleSet& set);

  Model& model() { return replicas_.front(); }
  // Called after every training step on the calling thread (a search's coordinator answers other
  // groups there while its own group trains).
  void set_step_hook(std::function<void()> hook) { step_hook_ = std::move(hook); }
  // Called on the calling thread between the batches of its share of each evaluation (validation
  // and test), so that a coordinator keeps answering during long evaluations. Unlike the step
  // hook it must not make a collective call: ranks evaluate different numbers of batches.
  void set_evaluation_hook(std::function<void()> hook) { evaluation_hook_ = std::move(hook); }
  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }
  std::int64_t global_batch() const { return global_batch_; }
  int threads() const { return pool_.size(); }
  // Copies the weights of replica 0 to the others (after loading weights into model()).
  void broadcast_weights();

 private:
  struct Worker {
    Tensor images, grad_logits;
    std::vector<std::int32_t> labels;
    double loss_sum = 0.0;
    std::int64_t correct = 0;
  };
  // One optimizer step on the samples at `batch`; returns the batch's summed loss.
  double train_step(std::span<const std::int64_t> batch, double lr, std::int64_t& correct);
  // Sums the worker replicas' gradients into the first (and, with data parallelism, over the
  // processes), takes the optimizer step and copies the weights to every worker replica.
  // `reported`: backward already handed every gradient to sync_ (the overlapping path).
  void apply_gradients(double lr, bool reported);
  // Forward and backward of one micro-batch (this process's shard of it); returns its summed loss.
  double micro_step(std::span<const std::int64_t> micro_batch, double scale,
                    const std::function<void(std::size_t)>& on_layer_done, std::int64_t& correct);
  void accumulate_gradients(bool first, bool last);
  void sum_worker_gradients();
  // Sums per-process statistics over the data-parallel replicas (no-op without them).
  void sum_over_replicas(std::span<double> values);

  const Config& config_;
  const TrainingData& data_;
  GradientSync* sync_;
  WorkerPool pool_;
  std::vector<Model> replicas_;
  std::vector<std::vector<Param>> replica_params_;  // replica_params_[r]: replica r's parameters
  std::vector<std::vector<Param>>
      layer_params_;  // layer_params_[i]: layer i's parameters in replica 0
  std::vector<Worker> workers_;
  std::vector<Tensor> accumulated_;  // running gradient sum over a step's micro-batches
  Tensor shard_images_;              // this process's part of the current micro-batch
  std::vector<std::int32_t> shard_labels_;
  std::unique_ptr<Optimizer> optimizer_;
  int accumulate_;  // micro-batches per optimizer step
  std::int64_t global_batch_;
  std::int64_t steps_per_epoch_;
  LrSchedule schedule_;
  std::int64_t global_step_ = 0;
  std::function<void()> step_hook_;
  std::function<void()> evaluation_hook_;
};

}  // namespace strata
