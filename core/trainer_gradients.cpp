// The trainer's gradient sums: over its worker threads, over micro-batches and chunks, and the
// optimizer step that the workers apply to the slices of every parameter, after backward or as it
// finishes each layer.
#include "core/trainer.hpp"

#include <algorithm>

#include "core/worker_pool.hpp"

namespace strata {

// With the units split a worker's rows are the ones DenseLayer gave it (worker_share of the units),
// so it steps only the rows its backward wrote.
std::pair<std::int64_t, std::int64_t> Trainer::step_share(const Param& p, int worker) const {
  const int threads = pool_.size();
  if (!unit_split_) return worker_share(p.value->size(), threads, worker);
  const std::int64_t rows = p.value->dim(0),
                     row_size = p.value->size() / std::max<std::int64_t>(rows, 1);
  const auto [first, last] = worker_share(rows, threads, worker);
  return {first * row_size, last * row_size};
}

void Trainer::sum_worker_gradients() {
  const auto& total = replica_params_.front();
  pool_.run([&](int worker) {
    for (std::size_t k = 0; k < total.size(); ++k) {
      auto [begin, end] = step_share(total[k], worker);
      float* g = total[k].grad->data();
      for (std::size_t r = 1; r < gradient_replicas(); ++r) {
        const float* h = replica_params_[r][k].grad->data();
        for (std::int64_t i = begin; i < end; ++i) g[i] += h[i];
      }
    }
  });
}

void Trainer::apply_gradients(double lr, bool reported) {
  const auto& total = replica_params_.front();
  // The workers' sum must be complete before the processes reduce it, unless a single worker
  // already handed each layer to sync_ during backward. An engine that sums over the replicas
  // itself returned the sums.
  bool workers_summed = gradient_replicas() == 1 || accumulate_ > 1;
  const bool host_sums = sync_ != nullptr && (engine_ == nullptr || !engine_->sums_over_replicas());
  if (host_sums && !reported) {
    if (!workers_summed) sum_worker_gradients();
    workers_summed = true;
    for (std::size_t k = total.size(); k-- > 0;) sync_->gradients_ready(std::span(&total[k], 1));
  }
  if (host_sums) sync_->finish();
  const TraceSpan step(trace_, "optimizer step", "compute");
  optimizer_->begin_step(total);
  // Each worker owns a slice of every parameter: it sums the replicas' gradients there (in replica
  // order, so the result does not depend on timing) and updates it, where every replica reads it
  // (they share the values), step_chunk elements at a time. With the units split the slice is the
  // worker's own rows, whose gradients it wrote and whose values only it reads in training.
  constexpr std::int64_t chunk = step_chunk;
  pool_.run([&](int worker) {
    for (std::size_t k = 0; k < total.size(); ++k) {
      auto [slice_begin, slice_end] = step_share(total[k], worker);
      float* g = total[k].grad->data();
      for (std::int64_t begin = slice_begin; begin < slice_end; begin += chunk) {
        const std::int64_t end = std::min(begin + chunk, slice_end);
        if (!workers_summed)
          for (std::size_t r = 1; r < gradient_replicas(); ++r) {
            const float* h = replica_params_[r][k].grad->data();
            for (std::int64_t i = begin; i < end; ++i) g[i] += h[i];
          }
        if (total[k].trainable) optimizer_->update(total[k], k, begin, end, lr * total[k].lr_scale);
      }
    }
  });
}

bool Trainer::steps_during_backward() const {
  if (pool_.size() == 1 || unit_split_ || accumulate_ != 1 || sync_ != nullptr ||
      engine_ != nullptr)
    return false;
  const std::int64_t largest_share = (local_batch_ + pool_.size() - 1) / pool_.size();
  return largest_share <= chunk_samples_;
}

void Trainer::take_step_pieces(int worker, double lr) {
  const auto& total = replica_params_.front();
  const int workers = pool_.size();
  const auto ready = [&](const StepPiece& piece) {
    return layers_done_[piece.layer].load(std::memory_order_acquire) == workers;
  };
  for (unsigned round = 0;; ++round) {
    // Its own next piece, else another worker's, the first whose layer is ready.
    const StepPiece* taken = nullptr;
    bool left = false;
    for (int offset = 0; offset < workers && taken == nullptr; ++offset) {
      const auto owner = static_cast<std::size_t>((worker + offset) % workers);
      std::size_t n = next_step_piece_[owner].load(std::memory_order_relaxed);
      while (n < step_pieces_[owner].size() && taken == nullptr) {
        left = true;
        if (!ready(step_pieces_[owner][n])) break;
        if (next_step_piece_[owner].compare_exchange_weak(n, n + 1, std::memory_order_relaxed))
          taken = &step_pieces_[owner][n];
      }
    }
    if (!left) return;
    if (taken == nullptr) {
      if (step_abandoned_.load(std::memory_order_relaxed)) return;
      spin_wait_round(round);
      continue;
    }
    const Param& p = total[taken->param];
    float* g = p.grad->data();
    for (std::size_t r = 1; r < gradient_replicas(); ++r) {
      const float* h = replica_params_[r][taken->param].grad->data();
      for (std::int64_t i = taken->begin; i < taken->end; ++i) g[i] += h[i];
    }
    optimizer_->update(p, taken->param, taken->begin, taken->end, lr * p.lr_scale);
  }
}

void Trainer::sum_chunk_gradients(Worker& w, const std::vector<Param>& params, bool first,
                                  bool last) {
  if (w.chunk_sum.size() != params.size()) {
    w.chunk_sum.clear();
    for (const Param& p : params) w.chunk_sum.emplace_back(p.grad->shape());
  }
  // The last chunk leaves the whole sum in the replica's gradients, where the step reads it.
  for (std::size_t k = 0; k < params.size(); ++k) {
    float* g = params[k].grad->data();
    float* sum = w.chunk_sum[k].data();
    const std::int64_t n = params[k].grad->size();
    if (first)
      std::copy(g, g + n, sum);
    else if (last)
      for (std::int64_t j = 0; j < n; ++j) g[j] += sum[j];
    else
      for (std::int64_t j = 0; j < n; ++j) sum[j] += g[j];
  }
}

void Trainer::accumulate_gradients(bool first, bool last) {
  const auto& total = replica_params_.front();
  if (accumulated_.empty())
    for (const auto& p : total) accumulated_.emplace_back(p.grad->shape());
  // Adds the micro-batch's gradients (every worker's, or replica 0's when the workers split the
  // units) to the running sum; the last micro-batch leaves the whole sum in replica 0's gradients,
  // where the optimizer step reads it.
  pool_.run([&](int worker) {
    for (std::size_t k = 0; k < total.size(); ++k) {
      auto [begin, end] = step_share(total[k], worker);
      float* acc = accumulated_[k].data();
      float* g = total[k].grad->data();
      for (std::int64_t i = begin; i < end; ++i) {
        float sum = first ? 0.0f : acc[i];
        for (std::size_t r = 0; r < gradient_replicas(); ++r)
          sum += replica_params_[r][k].grad->data()[i];
        if (last)
          g[i] = sum;
        else
          acc[i] = sum;
      }
    }
  });
}

}  // namespace strata
