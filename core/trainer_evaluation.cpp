// The trainer's evaluation and prediction: fixed chunks of rows over replicas and threads, so that
// results are bitwise the same on any layout.
#include "core/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/loss.hpp"

namespace strata {

namespace {

constexpr std::int64_t eval_batch = 256;

}  // namespace

void Trainer::for_each_evaluation_chunk(
    const SampleSet& set,
    const std::function<void(Worker&, std::int64_t chunk, std::int64_t first, const Tensor&)>&
        visit) {
  // The rows go in fixed chunks of eval_batch, chunk c to replica c mod D and there to worker
  // (c / D) mod threads. Callers keep each chunk's results in their own slot and combine them in
  // chunk order, so the result is the same to the bit on any number of replicas and threads:
  // strata predict on one rank reproduces what a run reported.
  const std::int64_t count = set.count();
  const std::int64_t chunks = (count + eval_batch - 1) / eval_batch;
  const int replica = sync_ != nullptr ? sync_->replica() : 0;
  const int threads = pool_.size();
  // The engine's parameters are the newest after its own steps; otherwise the host's go in.
  if (engine_ != nullptr && !engine_ahead_) engine_->load_parameters();
  pool_.run([&](int i) {
    Worker& w = workers_[static_cast<std::size_t>(i)];
    std::vector<std::int64_t> rows;
    for (std::int64_t c = 0; c < chunks; ++c) {
      if (c % replicas_count_ != replica || (c / replicas_count_) % threads != i) continue;
      const std::int64_t first = c * eval_batch, last = std::min(first + eval_batch, count);
      rows.resize(static_cast<std::size_t>(last - first));
      for (std::int64_t r = first; r < last; ++r) rows[static_cast<std::size_t>(r - first)] = r;
      gather_batch(set, rows, w.images, w.labels);
      visit(w, c, first,
            engine_ != nullptr ? engine_->logits(w.images)
                               : replicas_[static_cast<std::size_t>(i)].forward(w.images, false));
      if (i == 0 && evaluation_hook_) evaluation_hook_();  // worker 0 is the calling thread
    }
  });
}

Evaluation Trainer::evaluate(const SampleSet& set) {
  const TraceSpan span(trace_, "evaluate", "compute");
  Evaluation e;
  e.count = set.count();
  if (e.count == 0) return e;
  const std::int64_t chunks = (e.count + eval_batch - 1) / eval_batch;
  std::vector<double> sums(static_cast<std::size_t>(2 * chunks), 0.0);
  for_each_evaluation_chunk(set, [&](Worker& w, std::int64_t c, std::int64_t,
                                     const Tensor& logits) {
    sums[static_cast<std::size_t>(2 * c)] = softmax_cross_entropy(logits, w.labels, w.grad_logits) *
                                            static_cast<double>(w.labels.size());
    sums[static_cast<std::size_t>(2 * c + 1)] =
        static_cast<double>(count_correct(logits, w.labels));
  });
  sum_over_replicas(sums);
  double loss = 0.0, correct = 0.0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    loss += sums[static_cast<std::size_t>(2 * c)];
    correct += sums[static_cast<std::size_t>(2 * c + 1)];
  }
  e.loss = loss / static_cast<double>(e.count);
  e.accuracy = correct / static_cast<double>(e.count);
  return e;
}

std::vector<float> Trainer::predict(const SampleSet& set) {
  const std::int64_t classes = replicas_.front().num_classes();
  // Each row is this replica's or zero; the sum over replicas assembles them (adding zeros is
  // exact).
  std::vector<double> probabilities(static_cast<std::size_t>(set.count() * classes), 0.0);
  for_each_evaluation_chunk(set,
                            [&](Worker&, std::int64_t, std::int64_t first, const Tensor& logits) {
                              const std::int64_t rows = logits.shape()[0];
                              for (std::int64_t r = 0; r < rows; ++r) {
                                const float* z = logits.data() + r * classes;
                                const float top = *std::max_element(z, z + classes);
                                double total = 0.0;
                                double* out = probabilities.data() + (first + r) * classes;
                                for (std::int64_t k = 0; k < classes; ++k)
                                  total += out[k] = std::exp(double{z[k]} - top);
                                for (std::int64_t k = 0; k < classes; ++k) out[k] /= total;
                              }
                            });
  sum_over_replicas(probabilities);
  return {probabilities.begin(), probabilities.end()};
}

}  // namespace strata
