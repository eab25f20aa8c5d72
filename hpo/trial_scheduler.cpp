#include "hpo/trial_scheduler.hpp"

#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/errors.hpp"

namespace strata {

namespace {

// group leader -> coordinator: the last outcome, and a request for work
constexpr int tag_request = 7101;
// coordinator -> group leader: a trial, or stop
constexpr int tag_assign = 7102;
// group leader -> coordinator, after a request: why the last trial failed
constexpr int tag_reason = 7103;
// group leader -> coordinator during a trial: its validation value after an epoch
constexpr int tag_epoch = 7104;
// coordinator -> group leader: whether the pruning rule stops the trial there
constexpr int tag_verdict = 7105;
// group, trial id (-1: none; -2: none, the group was stopped), fitness, status, val acc, test acc,
// seconds, length of the reason, global batch, epochs trained
constexpr int request_size = 10;
// trial id, epoch, value
constexpr int epoch_report_size = 3;
constexpr double no_trial = -1.0;
constexpr double stopped_mid_trial = -2.0;
constexpr double stop_id = -1.0;

std::span<const std::byte> bytes_of(const std::vector<double>& v) {
  return std::as_bytes(std::span(v));
}
std::span<std::byte> bytes_of(std::vector<double>& v) {
  return std::as_writable_bytes(std::span(v));
}

std::vector<double> encode_request(int group,
                                   const std::optional<std::pair<int, TrialOutcome>>& last,
                                   bool interrupted) {
  std::vector<double> r(request_size, 0.0);
  r[0] = group;
  r[1] = last ? last->first : interrupted ? stopped_mid_trial : no_trial;
  if (last) {
    const TrialOutcome& o = last->second;
    r[2] = o.fitness;
    r[3] = static_cast<double>(o.status);
    r[4] = o.val_accuracy;
    r[5] = o.test_accuracy;
    r[6] = o.seconds;
    r[7] = static_cast<double>(o.reason.size());
    r[8] = o.global_batch;
    r[9] = o.epochs;
  }
  return r;
}

// The assignment message: trial id (or stop), generation, deme, then the genes.
std::vector<double> encode_trial(const Trial& t) {
  std::vector<double> a{static_cast<double>(t.id), static_cast<double>(t.generation),
                        static_cast<double>(t.deme)};
  a.insert(a.end(), t.genome.begin(), t.genome.end());
  return a;
}

Trial decode_trial(const std::vector<double>& a) {
  Trial t;
  t.id = static_cast<int>(a[0]);
  t.generation = static_cast<int>(a[1]);
  t.deme = static_cast<int>(a[2]);
  t.genome.assign(a.begin() + 3, a.end());
  return t;
}

TrialOutcome decode_outcome(const std::vector<double>& r) {
  TrialOutcome o;
  o.member_group = static_cast<int>(r[0]);
  o.fitness = r[2];
  o.status = static_cast<TrialStatus>(static_cast<int>(r[3]));
  o.val_accuracy = r[4];
  o.test_accuracy = r[5];
  o.seconds = r[6];
  o.global_batch = static_cast<int>(r[8]);
  o.epochs = static_cast<int>(r[9]);
  return o;
}

// Waits for `request` without spinning: where ranks share cores, a spinning wait takes the core
// that the coordinator (or a training) needs, and every answer comes a time slice late. Not
// watched: a group may wait for its next trial as long as the coordinator's own trial runs.
void wait_without_spinning(Request& request) {
  while (!request.test()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Thrown through a trial's evaluation when the coordinator's own work (the search, the trial log)
// fails during it. Not a std::exception, so that no trial-level handler records it as the trial's
// failure; run_trials rethrows the original error, which stops the job.
struct CoordinatorFailed {};

// World rank 0's bookkeeping: which trials wait, which groups wait for one, who has stopped.
class Coordinator {
 public:
  Coordinator(Search& search, const TrialFinished& finished, int dims, Assignment assignment,
              int groups)
      : search_(search),
        finished_(finished),
        dims_(dims),
        assignment_(assignment),
        groups_(groups) {
    // A resumed search's trials in flight when it stopped go out again first.
    int position = 0;
    for (const Trial& t : search_.unfinished()) queue_.push_back({t, position++ % groups_});
  }

  // The next assignment for `group`, stop, or nothing yet (the search waits for outstanding
  // results).
  std::optional<std::vector<double>> next_for(int group) {
    if (!stopping_) {
      if (queue_.empty() && !search_.done()) {
        int position = 0;
        for (const Trial& t : search_.next_batch()) queue_.push_back({t, position++ % groups_});
      }
      for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        if (assignment_ == Assignment::waves && it->second != group) continue;
        const Trial t = it->first;
        queue_.erase(it);
        running_[group] = {t.id, Clock::now()};
        return encode_trial(t);
      }
    }
    if (stopping_ || (queue_.empty() && search_.done() && search_.outstanding() == 0)) {
      running_.erase(group);
      ++stopped_;
      std::vector<double> stop(static_cast<std::size_t>(3 + dims_), 0.0);
      stop[0] = stop_id;
      return stop;
    }
    return std::nullopt;
  }

  void result(int group, int trial_id, const TrialOutcome& outcome) {
    running_.erase(group);
    // A pruned trial counts by its partial fitness.
    const bool ok = outcome.status == TrialStatus::ok || outcome.status == TrialStatus::pruned;
    search_.report(trial_id, ok ? outcome.fitness : std::numeric_limits<double>::quiet_NaN(), !ok,
                   outcome.epochs);
    TrialOutcome o = outcome;
    o.member_group = group;
    if (finished_) finished_(search_.trials()[static_cast<std::size_t>(trial_id)], o);
  }

  // The trials handed out whose results have not come in, by group.
  std::vector<TrialInFlight> in_flight() const {
    std::vector<TrialInFlight> running;
    running.reserve(running_.size());
    for (const auto& [group, r] : running_)
      running.push_back({r.trial_id, group, seconds_since(r.since)});
    return running;
  }

  // From now on every group that asks is told to stop; trials not handed out stay unfinished.
  void stop() { stopping_ = true; }
  bool stopping() const { return stopping_; }
  int stopped() const { return stopped_; }

 private:
  Search& search_;
  const TrialFinished& finished_;
  int dims_;
  Assignment assignment_;
  int groups_;
  std::deque<std::pair<Trial, int>>
      queue_;  // trials to hand out, with the group a wave schedule gives them
  struct Running {
    int trial_id;
    Clock::time_point since;
  };
  std::map<int, Running> running_;  // by group
  int stopped_ = 0;
  bool stopping_ = false;
};

}  // namespace

SchedulerStats run_trials(const Topology& topology, Search& search, const EvaluateTrial& evaluate,
                          const TrialFinished& finished, const SchedulerOptions& options) {
  const StopRequested& stop_requested = options.stop_requested;
  const EpochVerdict& epoch_verdict = options.epoch_verdict;
  const auto start = Clock::now();
  SchedulerStats stats;
  const int groups = topology.plan().groups, group = topology.coords().group;
  const bool leader = topology.member().rank() == 0, coordinator = topology.world_rank() == 0;
  const Communicator& world = topology.world();
  const Communicator& member = topology.member();
  // Every rank knows the genome length: the coordinator tells them once.
  std::string dims_text = coordinator ? std::to_string(search.space().params.size()) : "";
  world.broadcast_string(dims_text, 0);
  const int dims = std::stoi(dims_text);
  std::vector<double> assignment(static_cast<std::size_t>(3 + dims));

  std::optional<Coordinator> coord;
  std::deque<int> waiting;  // groups whose request the coordinator could not answer yet
  if (coordinator) coord.emplace(search, finished, dims, options.assignment, groups);
  auto send_to = [&](int to_group, const std::vector<double>& a) {
    world.isend_bytes(bytes_of(a), topology.plan().world_rank({to_group, 0, 0}), tag_assign).wait();
  };
  // The coordinator's side of the protocol, run between its own work.
  auto serve = [&] {
    if (!coordinator) return;
    if (stop_requested && stop_requested()) coord->stop();
    for (int source = 0; world.iprobe(tag_request, source);) {
      std::vector<double> r(request_size);
      world.irecv_bytes(bytes_of(r), source, tag_request).wait();
      const int from = static_cast<int>(r[0]);
      TrialOutcome outcome = decode_outcome(r);
      if (r[7] > 0) {
        std::vector<double> text(static_cast<std::size_t>(r[7] + 7) / 8);
        outcome.reason.resize(static_cast<std::size_t>(r[7]));
        world.irecv_bytes(bytes_of(text), source, tag_reason).wait();
        std::memcpy(outcome.reason.data(), text.data(), outcome.reason.size());
      }
      if (r[1] >= 0) coord->result(from, static_cast<int>(r[1]), outcome);
      if (r[1] == stopped_mid_trial) coord->stop();
      waiting.push_back(from);
    }
    // A trial's value after an epoch: the pruning rule's verdict goes straight back.
    for (int source = 0; epoch_verdict && world.iprobe(tag_epoch, source);) {
      std::vector<double> e(epoch_report_size);
      world.irecv_bytes(bytes_of(e), source, tag_epoch).wait();
      const std::vector<double> verdict{
          epoch_verdict(static_cast<int>(e[0]), static_cast<int>(e[1]), e[2]) ? 1.0 : 0.0};
      world.isend_bytes(bytes_of(verdict), source, tag_verdict).wait();
    }
    // A result may have completed a generation: answer every group that waits, in order.
    for (std::size_t n = waiting.size(); n-- > 0;) {
      const int g = waiting.front();
      waiting.pop_front();
      if (auto a = coord->next_for(g))
        send_to(g, *a);
      else
        waiting.push_back(g);
    }
    if (options.while_running) options.while_running([&] { return coord->in_flight(); });
  };

  std::exception_ptr coordinator_error;
  auto serve_during_trial = [&] {
    try {
      serve();
    } catch (...) {
      coordinator_error = std::current_exception();
      throw CoordinatorFailed{};
    }
  };

  // The group's verdict on its trial after an epoch: the leader asks the coordinator (which
  // decides itself when it leads this group), and shares the answer with its group.
  auto stop_after_epoch = [&](int trial_id, int epoch, double value) {
    if (!epoch_verdict) return false;
    std::vector<double> verdict{0.0};
    if (leader && coordinator) {
      serve_during_trial();
      verdict[0] = epoch_verdict(trial_id, epoch, value) ? 1.0 : 0.0;
    } else if (leader) {
      const std::vector<double> e{static_cast<double>(trial_id), static_cast<double>(epoch), value};
      world.isend_bytes(bytes_of(e), 0, tag_epoch).wait();
      Request answer = world.irecv_bytes(bytes_of(verdict), 0, tag_verdict);
      wait_without_spinning(answer);
    }
    Request shared = member.ibroadcast_bytes(bytes_of(verdict), 0);
    wait_without_spinning(shared);
    return verdict[0] != 0.0;
  };

  std::optional<std::pair<int, TrialOutcome>> last;
  bool interrupted = false;  // this group stopped mid-trial on a signal
  while (true) {
    // The group's leader obtains the next assignment; the coordinator from itself.
    if (leader && coordinator) {
      if (last) coord->result(group, last->first, last->second);
      if (interrupted) coord->stop();
      last.reset();
      serve();  // the result may have let waiting groups go on
      std::optional<std::vector<double>> a;
      while (!(a = coord->next_for(group))) {
        serve();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      assignment = *a;
    } else if (leader) {
      const auto r = encode_request(group, last, interrupted);
      world.isend_bytes(bytes_of(r), 0, tag_request).wait();
      if (last && !last->second.reason.empty()) {
        std::vector<double> text((last->second.reason.size() + 7) / 8, 0.0);
        std::memcpy(text.data(), last->second.reason.data(), last->second.reason.size());
        world.isend_bytes(bytes_of(text), 0, tag_reason).wait();
      }
      Request answer = world.irecv_bytes(bytes_of(assignment), 0, tag_assign);
      wait_without_spinning(answer);
      last.reset();
    }
    // The other ranks of the group wait here while the leader waits for the coordinator.
    Request shared = member.ibroadcast_bytes(bytes_of(assignment), 0);
    wait_without_spinning(shared);
    if (assignment[0] == stop_id) break;
    const Trial trial = decode_trial(assignment);
    const auto t0 = Clock::now();
    TrialOutcome outcome;
    try {
      const TrialChannel channel{serve_during_trial, [&](int epoch, double value) {
                                   return stop_after_epoch(trial.id, epoch, value);
                                 }};
      outcome = evaluate(trial, channel);
    } catch (const CoordinatorFailed&) {
      std::rethrow_exception(coordinator_error);
    } catch (const Interrupted&) {
      interrupted = true;
      continue;
    }
    stats.busy_seconds += seconds_since(t0);
    outcome.member_group = group;
    last = std::make_pair(trial.id, outcome);
  }
  // The coordinator stays until every other group has been told to stop.
  if (coordinator)
    while (coord->stopped() < groups) {
      serve();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  stats.wall_seconds = seconds_since(start);
  if (interrupted || (coordinator && coord->stopping()))
    throw Interrupted(
        "the search stopped on a signal; its unfinished trials resume from their "
        "checkpoints");
  return stats;
}

}  // namespace strata
