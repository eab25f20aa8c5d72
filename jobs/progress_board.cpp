#include "jobs/progress_board.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <type_traits>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "jobs/progress_lines.hpp"

namespace strata {

namespace {

// Apart from the trial scheduler's tags (71xx), which never run at the same time on the world.
constexpr int tag_report = 7201;
constexpr int tag_stop = 7202;

static_assert(std::is_trivially_copyable_v<MemberReport>, "sent as raw bytes");

std::span<const std::byte> bytes_of(const MemberReport& r) {
  return {reinterpret_cast<const std::byte*>(&r), sizeof r};
}

std::string accuracy(double value) {
  return value < 0 ? std::string("-") : fmt::format("{:.4f}", value);
}

}  // namespace

void MemberReport::update(const TrainProgress& p) {
  epoch = p.epoch;
  step = p.step;
  samples_per_s = p.samples_per_s;
  train_loss = p.loss;
}

void MemberReport::update(const EpochMetrics& m) {
  epoch = m.epoch;
  step = steps_per_epoch;
  train_loss = m.train_loss;
  val_accuracy = m.val_accuracy;
  test_accuracy = m.test_accuracy;
  samples_per_s = m.samples_per_s;
}

ProgressBoard::ProgressBoard(const Topology& topology, int members, double interval_s,
                             std::string what)
    : topology_(topology),
      what_(std::move(what)),
      interval_s_(interval_s),
      group_stopped_(static_cast<std::size_t>(topology.plan().groups), false),
      started_(Clock::now()),
      last_line_(Clock::now()),
      last_sent_(Clock::now()) {
  const int groups = topology.plan().groups;
  for (int m = 0; m < members; ++m) {
    MemberReport r;
    r.member = m;
    r.group = m % groups;
    latest_.push_back(r);
  }
}

void ProgressBoard::report(const MemberReport& r) {
  if (topology_.member().rank() != 0) return;
  const bool changed = r.state != last_state_ || r.member != last_member_;
  if (!changed && seconds_since(last_sent_) < interval_s_) return;
  last_sent_ = Clock::now();
  last_state_ = r.state;
  last_member_ = r.member;
  if (topology_.world_rank() == 0) {
    take(r);
    return;
  }
  // Small enough to go eagerly: the send completes without waiting for rank 0 to poll (which it
  // no longer does once its own group has stopped).
  topology_.world().isend_bytes(bytes_of(r), 0, tag_report).wait();
}

bool ProgressBoard::stop_elsewhere() {
  if (stop_received_ || topology_.member().rank() != 0 || topology_.world_rank() == 0)
    return stop_received_;
  int source = 0;
  if (topology_.world().iprobe(tag_stop, source)) {
    std::byte nothing{};
    topology_.world().irecv_bytes({&nothing, 1}, source, tag_stop).wait();
    stop_received_ = true;
  }
  return stop_received_;
}

void ProgressBoard::stop_everyone() {
  if (stop_sent_) return;
  stop_sent_ = true;
  stop_received_ = true;  // rank 0's own group stops too
  const std::byte stop{1};
  const Plan& plan = topology_.plan();
  for (int g = 1; g < plan.groups; ++g)
    topology_.world().isend_bytes({&stop, 1}, plan.world_rank({g, 0, 0}), tag_stop).wait();
}

void ProgressBoard::poll() {
  if (topology_.world_rank() != 0) return;
  const Communicator& world = topology_.world();
  for (int source = 0; world.iprobe(tag_report, source);) {
    MemberReport r;
    world.irecv_bytes({reinterpret_cast<std::byte*>(&r), sizeof r}, source, tag_report).wait();
    take(r);
  }
  // A single training prints its own lines.
  if (latest_.size() > 1 && seconds_since(last_line_) >= interval_s_) print_line();
}

void ProgressBoard::take(const MemberReport& r) {
  if (r.member < 0 || r.member >= static_cast<int>(latest_.size())) return;
  latest_[static_cast<std::size_t>(r.member)] = r;
  if (r.state != MemberState::stopped) return;
  group_stopped_[static_cast<std::size_t>(r.group)] = true;
  // A signal that reached one group ends the stage everywhere, as it would the job.
  stop_everyone();
}

bool ProgressBoard::finished() const {
  return std::all_of(latest_.begin(), latest_.end(), [&](const MemberReport& r) {
    return r.state == MemberState::done || group_stopped_[static_cast<std::size_t>(r.group)];
  });
}

void ProgressBoard::wait_for_all(const StopSignals* signals) {
  if (topology_.world_rank() != 0) return;
  while (!finished()) {
    if (signals != nullptr && signals->requested()) stop_everyone();
    poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  poll();
  print_line();
}

void ProgressBoard::print_line() {
  last_line_ = Clock::now();
  int done = 0, running = 0, stopped = 0;
  double samples_per_s = 0.0, fraction = 0.0;
  const MemberReport* best = nullptr;
  for (const MemberReport& r : latest_) {
    const bool group_stopped = group_stopped_[static_cast<std::size_t>(r.group)];
    if (r.state == MemberState::done) {
      ++done;
      fraction += 1.0;
    } else if (r.state == MemberState::stopped || group_stopped) {
      ++stopped;
    } else if (r.state == MemberState::running) {
      ++running;
      samples_per_s += r.samples_per_s;
      if (r.epochs > 0 && r.steps_per_epoch > 0)
        fraction += (r.epoch - 1 + static_cast<double>(r.step) / r.steps_per_epoch) / r.epochs;
    }
    if (r.val_accuracy >= 0 && (best == nullptr || r.val_accuracy > best->val_accuracy)) best = &r;
  }
  const auto members = static_cast<double>(latest_.size());
  const double elapsed = seconds_since(started_);
  const bool over = done + stopped == static_cast<int>(latest_.size());
  const std::string eta = over ? fmt::format("over after {}", format_duration(elapsed))
                          : fraction > 0
                              ? "ETA " + format_duration(elapsed * (members - fraction) / fraction)
                              : "ETA -";
  fmt::print(
      "[{}] {} members: {} done, {} running, {} waiting{} | best val acc {} | {}{:.0f}% | {}\n",
      what_, latest_.size(), done, running,
      static_cast<int>(latest_.size()) - done - running - stopped,
      stopped > 0 ? fmt::format(", {} stopped", stopped) : "",
      best ? fmt::format("{} (member {})", accuracy(best->val_accuracy), best->member) : "-",
      running > 0 ? fmt::format("{:.0f} samples/s | ", samples_per_s) : "",
      100.0 * fraction / std::max(members, 1.0), eta);
  std::fflush(stdout);
}

std::string ProgressBoard::summary() const {
  std::vector<const MemberReport*> rows;
  for (const auto& r : latest_) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](const MemberReport* a, const MemberReport* b) {
    return a->val_accuracy > b->val_accuracy;
  });
  // Thousands of members would bury the rest of the log: the best, the worst and a few between.
  constexpr std::size_t shown = 12;
  std::vector<std::size_t> picked;
  if (rows.size() <= shown) {
    for (std::size_t i = 0; i < rows.size(); ++i) picked.push_back(i);
  } else {
    for (std::size_t k = 0; k < shown; ++k) picked.push_back(k * (rows.size() - 1) / (shown - 1));
  }
  std::string text =
      fmt::format("[{}] members by validation accuracy{}:\n", what_,
                  rows.size() > shown
                      ? fmt::format(" ({} of {}: best, worst, evenly between)", shown, rows.size())
                      : "");
  text += fmt::format("  {:>7} {:>6} {:>7} {:>10} {:>8} {:>8} {:>9}\n", "member", "group", "epochs",
                      "train loss", "val acc", "test acc", "seconds");
  for (std::size_t i : picked) {
    const MemberReport& r = *rows[i];
    text += fmt::format("  {:>7} {:>6} {:>7} {:>10} {:>8} {:>8} {:>9.1f}\n", r.member, r.group,
                        r.state == MemberState::done ? fmt::format("{}", r.epochs)
                                                     : fmt::format("{}/{}", r.epoch, r.epochs),
                        r.state == MemberState::waiting ? "-" : fmt::format("{:.4f}", r.train_loss),
                        accuracy(r.val_accuracy), accuracy(r.test_accuracy), r.seconds);
  }
  return text;
}

}  // namespace strata
