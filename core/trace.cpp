#include "core/trace.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace strata {

int Trace::thread_index() {
  const auto id = std::this_thread::get_id();
  const auto found = std::find(threads_.begin(), threads_.end(), id);
  if (found != threads_.end()) return static_cast<int>(found - threads_.begin());
  threads_.push_back(id);
  return static_cast<int>(threads_.size()) - 1;
}

void Trace::complete(std::string_view name, const char* category, Clock::time_point start) {
  const auto end = Clock::now();
  const double start_us = std::chrono::duration<double, std::micro>(start - origin_).count();
  const double duration_us = std::chrono::duration<double, std::micro>(end - start).count();
  const std::lock_guard lock(mutex_);
  if (events_.size() >= max_events) {
    ++dropped_;
    return;
  }
  events_.push_back({std::string(name), category, start_us, duration_us, thread_index()});
}

std::int64_t Trace::dropped() const {
  const std::lock_guard lock(mutex_);
  return dropped_;
}

std::string Trace::events_json(int process, std::string_view process_name) const {
  const std::lock_guard lock(mutex_);
  nlohmann::json names = nlohmann::json::array();
  names.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", process},
                   {"args", {{"name", std::string(process_name)}}}});
  // The first thread to record is the rank's main thread (it starts every step).
  for (std::size_t t = 0; t < threads_.size(); ++t)
    names.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", process},
         {"tid", t},
         {"args", {{"name", t == 0 ? std::string("main") : fmt::format("thread {}", t)}}}});
  std::string out = names.dump();
  out.erase(0, 1);  // the elements only: the caller joins every rank's into one array
  out.pop_back();
  out.reserve(out.size() + events_.size() * 96);
  for (const Event& e : events_)
    fmt::format_to(
        std::back_inserter(out),
        R"(,{{"name":{},"cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f}}})",
        nlohmann::json(e.name).dump(), e.category, process, e.thread, e.start_us, e.duration_us);
  return out;
}

std::map<std::string, double> Trace::totals() const {
  const std::lock_guard lock(mutex_);
  std::map<std::string, double> sums;
  for (const Event& e : events_) sums[e.name] += e.duration_us * 1e-6;
  return sums;
}

}  // namespace strata
