// Trains one model on one process: epochs of shuffled batches on worker threads that split each
// batch or each dense layer's units.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/gradient_engine.hpp"
#include "core/gradient_sync.hpp"
#include "core/lr_schedule.hpp"
#include "core/model.hpp"
#include "core/optimizer.hpp"
#include "core/plan.hpp"
#include "core/state.hpp"
#include "core/trace.hpp"
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

// One training step, over the global batch (every replica's samples).
struct StepMetrics {
  std::int64_t global_step = 0;  // steps done in the whole training, this one included
  int epoch = 0;                 // 1-based
  std::int64_t step = 0;         // steps done in this epoch, this one included
  double loss = 0.0;             // mean over the step's samples
  double accuracy = 0.0;
  double lr = 0.0;
};

using ProgressCallback = std::function<void(const TrainProgress&)>;

// The config's model for the data's sample shape, initialised from derive(run.seed, init).
// `layers` makes model-parallel layers (parallel/), or nothing for the built-in ones.
Model build_model(const Config& config, const TrainingData& data, const LayerFactory& layers = {});

// The plan of a config trained on its own, without the planner (strata predict, tests,
// benchmarks): `replicas` data-parallel replicas of one shard and the config's fixed K.
Plan standalone_plan(const Config& config, int replicas = 1);

// Where a training stands: the epoch it is in, the steps done in it and their running sums.
struct TrainPosition {
  int epoch = 1;                // 1-based; epochs + 1 once the last epoch is done
  std::int64_t epoch_step = 0;  // optimizer steps done in this epoch
  std::int64_t global_step = 0;
  double loss_sum = 0.0;  // summed over this epoch's samples so far, over every replica
  double correct = 0.0;
  double train_seconds = 0.0;  // spent in this epoch's steps so far, across interruptions
  double epoch_seconds = 0.0;  // spent in this epoch so far, across interruptions
};

class Trainer {
 public:
  // Trains `model` (built by build_model) as `plan` says: every optimizer step takes a global
  // batch of plan.global_batch() = K x D x local_batch samples, this process being replica
  // sync->replica() of D = plan.data (no sync: D must be 1). `threads` workers split every batch,
  // each with single-threaded kernels on its own replica of the model, or every dense layer's
  // units (config.run.thread_split, splits_units()). Model-parallel layers
  // communicate inside forward and backward, so a model with them must run one worker thread
  // (MPI is called from the main thread only).
  Trainer(const Config& config, Model model, const TrainingData& data, const Plan& plan,
          int threads, GradientSync* sync = nullptr);

  // Runs the rest of the current epoch (from where a restored state left it) and evaluates on
  // validation and test data; the position then moves to the next epoch. Calls `on_progress` at
  // most every output.progress_seconds. Throws DivergedError on a NaN/inf loss.
  EpochMetrics run_epoch(const ProgressCallback& on_progress);
  Evaluation evaluate(const SampleSet& set);
  // The class probabilities (softmax) of every row of `set`, [rows x classes] row-major, on every
  // replica: the same to the bit on any number of replicas and threads.
  std::vector<float> predict(const SampleSet& set);

  // The host model (replica 0), with the newest weights: after steps on a gradient engine that
  // steps on its device, they are copied back first, and go to the device again before its next
  // step (the caller may have changed them).
  Model& model();
  const TrainingData& data() const { return data_; }
  const TrainPosition& position() const { return position_; }
  // The metrics of the last epoch that ended (saved with the state, so that a training resumed
  // after its last epoch still knows them); epoch 0 before the first.
  const EpochMetrics& last_epoch() const { return last_epoch_; }
  // The last training step's metrics, for the step hook to log.
  const StepMetrics& last_step() const { return last_step_; }
  // Called after every training step on the calling thread, with the position already counting
  // the step: a checkpoint taken there resumes at the next step. A search's coordinator answers
  // other groups there while its own group trains. It may throw to stop the training.
  void set_step_hook(std::function<void()> hook) { step_hook_ = std::move(hook); }
  // Called on the calling thread between the batches of its share of each evaluation (validation
  // and test), so that a coordinator keeps answering during long evaluations. Unlike the step
  // hook it must not make a collective call: ranks evaluate different numbers of batches.
  void set_evaluation_hook(std::function<void()> hook) { evaluation_hook_ = std::move(hook); }
  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }
  std::int64_t global_batch() const { return global_batch_; }
  int accumulate() const { return accumulate_; }
  int threads() const { return pool_.size(); }
  // Whether the worker threads split each dense layer's units in training rather than the batch,
  // so that each thread keeps its rows of the weights, gradients and optimizer moments, and only
  // activations pass between the cores: with more than one thread, for a model whose only
  // parameters are dense layers' (Model::can_split_units), when run.thread_split is units, or
  // auto and the activations are the smaller traffic (chooses_unit_split). Evaluation splits the
  // batch either way.
  bool splits_units() const { return unit_split_; }
  // The most samples one worker passes through the model at once when the workers split the
  // batch: a larger share of a micro-batch goes through in chunks (their gradients summed), so
  // that the activations stay in cache. With the units split the local batch goes through whole.
  std::int64_t chunk_samples() const { return chunk_samples_; }
  // Whether the workers take the optimizer step as their backward passes finish, each piece of it
  // once every worker's backward is done with its layer: with more than one worker splitting the
  // batch, one micro-batch, no sync or engine to wait for, and every worker's share in one chunk.
  // A worker that finishes first then steps the late layers' parameters (the large dense layers)
  // while the others finish the early ones, instead of waiting for them. The weights are the same
  // to the bit as with the step after backward.
  bool steps_during_backward() const;
  // From now on every step's forward and backward pass, and evaluation's forward passes, run on
  // `engine` (a GPU), which must outlive the trainer's use of it. The gradient sums over
  // replicas stay on the host unless the engine makes them (sums_over_replicas). When the engine
  // steps on its device and nothing is left for the host between backward and the update (one
  // micro-batch per step; one replica, or sums on the engine), the optimizer step runs there too
  // and the parameters and optimizer state stay on the device: copied in after the host's copy
  // changed, out before it is read (model(), save_state) and never per step. Needs one worker
  // thread (std::invalid_argument otherwise).
  void set_gradient_engine(GradientEngine* engine);
  const GradientEngine* gradient_engine() const { return engine_; }
  // Where the forward and backward passes run: the engine's GPU ("GPU 0 (NVIDIA H200)"), or "CPU".
  std::string device() const { return engine_ != nullptr ? engine_->where() : "CPU"; }
  // Whether the optimizer steps run on the engine (see set_gradient_engine).
  bool steps_on_engine() const;
  // Records data reads, every replica's forward and backward per layer (with the units split,
  // each layer's run on the calling thread), and optimizer steps on `trace` (null: off).
  void set_trace(Trace* trace);
  // Call after loading weights into model(): the worker replicas share its values already, and a
  // gradient engine takes them before its next step. (A GradientSync attaches to
  // model().trainable_params(): frozen parameters are not reduced.)
  void broadcast_weights();

  // The whole training state at a step boundary: weights ("weights/..."), optimizer
  // ("optimizer/..."), position and data order ("trainer/..."). It does not depend on D, M, K
  // or the thread count, so any decomposition with the same global batch resumes it.
  void save_state(StateDict& out);
  // save_state without waiting for an engine whose steps are ahead of the host: its parameters
  // and moments are still on their way (GradientEngine::start_state_copy) while `out` holds the
  // host's older values under their keys. The returned completion, run on any one thread before
  // `out` is read, waits for the copy and puts its values in. Empty when nothing is on its way:
  // `out` is then complete. The host's copy stays behind the engine's, as between steps.
  std::function<void(StateDict&)> save_state_in_flight(StateDict& out);
  // Throws DataError when the state belongs to another model, optimizer or global batch.
  void load_state(const StateDict& in);

 private:
  struct Worker {
    Tensor images, grad_logits;
    std::vector<std::int32_t> labels;
    double loss_sum = 0.0;
    std::int64_t correct = 0;
    std::vector<Tensor> chunk_sum;  // the gradients of the worker's earlier chunks
  };
  // One optimizer step on the samples at `batch`; returns the batch's summed loss.
  double train_step(std::span<const std::int64_t> batch, double lr, std::int64_t& correct);
  // Sums the worker replicas' gradients into the first (none to sum when the workers split the
  // units) and, with data parallelism, over the processes, then takes the optimizer step on the
  // weights every replica reads.
  // `reported`: backward already handed every gradient to sync_ (the overlapping path).
  void apply_gradients(double lr, bool reported);
  // Forward and backward of one micro-batch (this process's shard of it); returns its summed loss.
  // `first_sample`: the micro-batch's position in the global batch.
  // `step_lr`: the workers take the optimizer step at this rate as backward finishes each layer
  // (steps_during_backward), and on_layer_done is not called.
  double micro_step(std::span<const std::int64_t> micro_batch, std::int64_t first_sample,
                    double scale, const std::function<void(std::size_t)>& on_layer_done,
                    std::optional<double> step_lr, std::int64_t& correct);
  // Worker i's forward and backward passes over its part of the micro-batch's `shard` (`local`
  // samples), handing each layer to on_layer_done as backward finishes it.
  void worker_pass(int i, std::span<const std::int64_t> shard, std::int64_t local,
                   bool workers_read, std::int64_t first_sample, double scale,
                   const std::function<void(std::size_t)>& on_layer_done);
  void accumulate_gradients(bool first, bool last);
  // Adds a worker's chunk's gradients (`params`: its replica's) to those of its earlier chunks of
  // the micro-batch; after the last chunk the replica's gradients hold the sum.
  static void sum_chunk_gradients(Worker& w, const std::vector<Param>& params, bool first,
                                  bool last);
  // This process's shard of `micro_batch`: the local batch's sample indices.
  std::span<const std::int64_t> local_shard(std::span<const std::int64_t> micro_batch) const;
  // Reads this process's shard of `micro_batch` into shard_images_ and shard_labels_; returns its
  // size (the local batch).
  std::int64_t read_shard(std::span<const std::int64_t> micro_batch);
  // Copies the engine's parameters and optimizer state to the host when its steps made them newer.
  void settle_host();
  // save_state's entries from the host's copy as it is.
  void write_state(StateDict& out);
  void sum_worker_gradients();
  // Takes pieces of the optimizer step until none are left (steps_during_backward): the next
  // of its own whose layer is ready, else the next ready one of another worker's. Returns early
  // if another worker failed (its exception ends the run).
  void take_step_pieces(int worker, double lr);
  // The models whose gradients a step sums: every worker's replica, or replica 0 alone when the
  // workers split the units.
  std::size_t gradient_replicas() const { return unit_split_ ? 1 : replicas_.size(); }
  // Worker's slice of parameter `p` in the step's sums and update: its rows (its units) when the
  // workers split the units, else an even share of the elements.
  std::pair<std::int64_t, std::int64_t> step_share(const Param& p, int worker) const;
  // Whether the workers split the units (splits_units), as `split` asks for; a ConfigError when
  // it asks for units on a model that cannot split them.
  bool chooses_unit_split(ThreadSplit split);
  // micro_step's forward and backward with the workers splitting the units, on this process's
  // `shard` of the micro-batch; unless `workers_read`, it is read into shard_images_ already.
  double unit_split_pass(std::span<const std::int64_t> shard, bool workers_read,
                         std::int64_t first_sample, double scale, std::int64_t& correct);
  // Runs the model over `set` in fixed chunks shared out over replicas and worker threads, calling
  // `visit` with each chunk's logits (w.labels holds its labels) on the worker that ran it.
  void for_each_evaluation_chunk(
      const SampleSet& set,
      const std::function<void(Worker&, std::int64_t chunk, std::int64_t first, const Tensor&)>&
          visit);
  // Sums per-process statistics over the data-parallel replicas (no-op without them).
  void sum_over_replicas(std::span<double> values);

  const Config& config_;
  const TrainingData& data_;
  GradientSync* sync_;
  GradientEngine* engine_ = nullptr;
  // engine_ took steps the host's parameters and optimizer do not have yet.
  bool engine_ahead_ = false;
  // The host's parameters or optimizer state may differ from the engine's: they go to it before
  // its next step.
  bool host_changed_ = true;
  WorkerPool pool_;
  std::vector<Model> replicas_;
  std::vector<std::vector<Param>> replica_params_;  // replica_params_[r]: replica r's parameters
  std::vector<std::vector<Param>>
      layer_params_;  // layer_params_[i]: layer i's parameters in replica 0
  std::vector<Worker> workers_;
  // The optimizer step in fixed pieces, each worker's slice of every parameter (step_share) for
  // its own, the last layer's first: which worker takes a piece does not change its sums, so the
  // weights do not depend on the workers' timing. A worker takes its own pieces where it can, whose
  // moments and weights it stepped the step before, still in its caches.
  struct StepPiece {
    std::size_t param;  // index into replica_params_[r]
    std::size_t layer;
    std::int64_t begin, end;
  };
  // Elements of a parameter stepped at once: they stay in L1 between the sum over the replicas
  // and the update, so each array crosses the cache hierarchy once per step.
  static constexpr std::int64_t step_chunk = 2048;
  std::vector<std::vector<StepPiece>> step_pieces_;        // [worker]: its own pieces
  std::vector<std::atomic<std::size_t>> next_step_piece_;  // [worker]: the next not taken
  std::vector<std::atomic<int>> layers_done_;  // workers whose backward finished layer i this step
  std::atomic<bool> step_abandoned_ = false;   // a worker failed in the step
  std::vector<Tensor> accumulated_;            // running gradient sum over a step's micro-batches
  Tensor shard_images_;                        // this process's part of the current micro-batch
  std::vector<std::int32_t> shard_labels_;
  std::unique_ptr<Optimizer> optimizer_;
  int local_batch_;
  int replicas_count_;              // D
  int accumulate_;                  // micro-batches per optimizer step
  std::int64_t chunk_samples_ = 1;  // the most samples a worker passes through the model at once
  bool unit_split_ = false;         // splits_units()
  std::int64_t global_batch_;
  std::int64_t steps_per_epoch_;
  LrSchedule schedule_;
  TrainPosition position_;
  EpochMetrics last_epoch_;
  StepMetrics last_step_;
  std::function<void()> step_hook_;
  std::function<void()> evaluation_hook_;
  Trace* trace_ = nullptr;
};

}  // namespace strata
