// A process's timeline for `output.trace`: complete events (forward and backward per layer, data
// reads, optimizer steps, allreduces, checkpoint writes, trials), each with its thread, written
// as a Chrome trace that Perfetto and chrome://tracing read. Off, it costs a null test per event.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace strata {

class Trace {
 public:
  using Clock = std::chrono::steady_clock;

  // Times count from here: create the traces of all ranks at the same moment (after a barrier).
  Trace() = default;

  // Records the event [start, now) on the calling thread. Thread-safe. Past max_events the
  // events are counted, not kept, so that a long run's trace stays readable.
  void complete(std::string_view name, const char* category, Clock::time_point start);
  // The events as the elements of a JSON array (no brackets), with pid `process`, preceded by
  // the process's and its threads' names.
  std::string events_json(int process, std::string_view process_name) const;
  std::int64_t dropped() const;
  // Seconds recorded under each event name, over all threads.
  std::map<std::string, double> totals() const;

  static constexpr std::size_t max_events = 2'000'000;

 private:
  struct Event {
    std::string name;
    const char* category;
    double start_us, duration_us;
    int thread;
  };
  int thread_index();  // with mutex_ held

  Clock::time_point origin_ = Clock::now();
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::vector<std::thread::id> threads_;  // index = the thread's number in the trace
  std::int64_t dropped_ = 0;
};

// An event from its construction to its destruction, on a trace that may be null (tracing off).
class TraceSpan {
 public:
  TraceSpan(Trace* trace, std::string_view name, const char* category)
      : trace_(trace), name_(trace != nullptr ? name : std::string_view()), category_(category) {
    if (trace_ != nullptr) start_ = Trace::Clock::now();
  }
  ~TraceSpan() {
    if (trace_ != nullptr) trace_->complete(name_, category_, start_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Trace* trace_;
  std::string_view name_;  // must outlive the span
  const char* category_;
  Trace::Clock::time_point start_;
};

}  // namespace strata
