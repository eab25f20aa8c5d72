// What one output.trace event costs: THREADS threads each open and close spans on one Trace as
// fast as they can (the worst case for its mutex: in training the events are microseconds apart),
// against the same loop with tracing off. tests/bench/run_trace_bench.sh multiplies the cost by
// the events of a traced training and divides by its untraced time, a resolution its own timed
// runs cannot reach on a noisy machine.
//
//   strata_bench_trace_events [THREADS] [EVENTS_PER_THREAD] [ROUNDS]
// Prints one JSON line: {"threads": T, "ns_per_event": median over the rounds of the slowest
// thread's time per event, less the untraced loop's, "rounds": [...]}.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/measurement.hpp"
#include "core/trace.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per span of the slowest of `threads` threads, each making `events` spans at once.
double seconds_per_span(strata::Trace* trace, int threads, int events) {
  // Names as the model gives its layers' spans: long enough not to fit a short string.
  const std::vector<std::string> names = {"forward conv2d_3", "backward conv2d_3",
                                          "forward dense_7", "backward dense_7"};
  std::atomic<int> waiting{threads};
  std::vector<double> seconds(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) {
      }
      const auto start = Clock::now();
      for (int i = 0; i < events; ++i) {
        const strata::TraceSpan span(trace, names[static_cast<std::size_t>(i) % names.size()],
                                     "compute");
      }
      seconds[static_cast<std::size_t>(t)] =
          std::chrono::duration<double>(Clock::now() - start).count();
    });
  for (auto& thread : pool) thread.join();
  return *std::max_element(seconds.begin(), seconds.end()) / events;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int events = argc > 2 ? std::atoi(argv[2]) : 100'000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
  if (threads < 1 || events < 1 || rounds < 1 ||
      static_cast<std::size_t>(threads) * static_cast<std::size_t>(events) >
          strata::Trace::max_events) {
    std::fprintf(stderr,
                 "usage: strata_bench_trace_events [THREADS >= 1] [EVENTS_PER_THREAD >= 1] "
                 "[ROUNDS >= 1], THREADS x EVENTS_PER_THREAD at most %zu\n",
                 strata::Trace::max_events);
    return 2;
  }
  std::vector<double> ns;
  for (int r = 0; r < rounds; ++r) {
    strata::Trace trace;  // a fresh one each round, so that no round passes max_events
    const double on = seconds_per_span(&trace, threads, events);
    const double off = seconds_per_span(nullptr, threads, events);
    ns.push_back((on - off) * 1e9);
  }
  std::string list;
  for (double x : ns) list += fmt::format("{}{:.1f}", list.empty() ? "" : ", ", x);
  fmt::print("{{\"threads\": {}, \"ns_per_event\": {:.1f}, \"rounds\": [{}]}}\n", threads,
             strata::median(ns), list);
  return 0;
}
