#include "hpo/trial_scheduler.hpp"

#include <mpi.h>

#include <chrono>
#include <deque>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

// group leader -> coordinator: the last outcome, and a request for work
constexpr int tag_request = 7101;
// coordinator -> group leader: a trial, or stop
constexpr int tag_assign = 7102;
// group leader -> coordinator, after a request: why the last trial failed
constexpr int tag_reason = 7103;
// group, trial id (-1: none), fitness, status, val acc, test acc, seconds, length of the reason,
// global batch
constexpr int request_size = 9;
constexpr double stop_id = -1.0;

void check(int rc, const char* op) {
  if (rc != MPI_SUCCESS)
    throw std::runtime_error(fmt::format("trial scheduler: {} failed (MPI error {})", op, rc));
}

std::vector<double> encode_request(int group,
                                   const std::optional<std::pair<int, TrialOutcome>>& last) {
  std::vector<double> r(request_size, 0.0);
  r[0] = group;
  r[1] = last ? last->first : -1;
  if (last) {
    const TrialOutcome& o = last->second;
    r[2] = o.fitness;
    r[3] = static_cast<double>(o.status);
    r[4] = o.val_accuracy;
    r[5] = o.test_accuracy;
    r[6] = o.seconds;
    r[7] = static_cast<double>(o.reason.size());
    r[8] = o.global_batch;
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

// Waits for `request` without spinning: where ranks share cores, a spinning wait takes the core
// that the coordinator (or a training) needs, and every answer comes a time slice late.
void wait_without_spinning(MPI_Request& request, const char* op) {
  for (int done = 0;;) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Thrown through a trial's evaluation when the coordinator's own work (the search, the trial log)
// fails during it. Not a std::exception, so that no trial-level handler records it as the trial's
// failure; run_trials rethrows the original error, which stops the job.
struct CoordinatorFailed {};

Trial decode_trial(const std::vector<double>& a) {
  Trial t;
  t.id = static_cast<int>(a[0]);
  t.generation = static_cast<int>(a[1]);
  t.deme = static_cast<int>(a[2]);
  t.genome.assign(a.begin() + 3, a.end());
  return t;
}

// World rank 0's bookkeeping: which trials wait, which groups wait for one, who has stopped.
class Coordinator {
 public:
  Coordinator(Search& search, const TrialFinished& finished, int dims, Assignment assignment,
              int groups)
      : search_(search),
        finished_(finished),
        dims_(dims),
        assignment_(assignment),
        groups_(groups) {}

  // The next assignment for `group`, stop, or nothing yet (the search waits for outstanding
  // results).
  std::optional<std::vector<double>> next_for(int group) {
    if (queue_.empty() && !search_.done()) {
      int position = 0;
      for (const Trial& t : search_.next_batch()) queue_.push_back({t, position++ % groups_});
    }
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (assignment_ == Assignment::waves && it->second != group) continue;
      const Trial t = it->first;
      queue_.erase(it);
      return encode_trial(t);
    }
    if (queue_.empty() && search_.done() && search_.outstanding() == 0) {
      ++stopped_;
      std::vector<double> stop(static_cast<std::size_t>(3 + dims_), 0.0);
      stop[0] = stop_id;
      return stop;
    }
    return std::nullopt;
  }

  void result(int group, int trial_id, const TrialOutcome& outcome) {
    const bool ok = outcome.status == TrialStatus::ok;
    search_.report(trial_id, ok ? outcome.fitness : std::numeric_limits<double>::quiet_NaN(), !ok);
    TrialOutcome o = outcome;
    o.member_group = group;
    if (finished_) finished_(search_.trials()[static_cast<std::size_t>(trial_id)], o);
  }

  int stopped() const { return stopped_; }

 private:
  Search& search_;
  const TrialFinished& finished_;
  int dims_;
  Assignment assignment_;
  int groups_;
  std::deque<std::pair<Trial, int>>
      queue_;  // trials to hand out, with the group a wave schedule gives them
  int stopped_ = 0;
};

TrialOutcome decode_outcome(const std::vector<double>& r) {
  TrialOutcome o;
  o.member_group = static_cast<int>(r[0]);
  o.fitness = r[2];
  o.status = static_cast<TrialStatus>(static_cast<int>(r[3]));
  o.val_accuracy = r[4];
  o.test_accuracy = r[5];
  o.seconds = r[6];
  o.global_batch = static_cast<int>(r[8]);
  return o;
}

}  // namespace

SchedulerStats run_trials(const Topology& topology, Search& search, const EvaluateTrial& evaluate,
                          const TrialFinished& finished, Assignment schedule) {
  const auto start = Clock::now();
  SchedulerStats stats;
  const int groups = topology.plan().groups, group = topology.coords().group;
  const bool leader = topology.member().rank() == 0, coordinator = topology.world_rank() == 0;
  const MPI_Comm world = MPI_COMM_WORLD, member = topology.member().handle();
  // Every rank knows the genome length: the coordinator tells them once.
  int dims = coordinator ? static_cast<int>(search.space().params.size()) : 0;
  check(MPI_Bcast(&dims, 1, MPI_INT, 0, world), "MPI_Bcast");
  std::vector<double> assignment(static_cast<std::size_t>(3 + dims));

  std::optional<Coordinator> coord;
  std::deque<int> waiting;  // groups whose request the coordinator could not answer yet
  if (coordinator) coord.emplace(search, finished, dims, schedule, groups);
  auto send_to = [&](int to_group, const std::vector<double>& a) {
    check(MPI_Send(a.data(), static_cast<int>(a.size()), MPI_DOUBLE,
                   topology.plan().world_rank({to_group, 0, 0}), tag_assign, world),
          "MPI_Send");
  };
  // The coordinator's side of the protocol, run between its own work.
  auto serve = [&] {
    if (!coordinator) return;
    for (int pending = 1; pending;) {
      MPI_Status status;
      check(MPI_Iprobe(MPI_ANY_SOURCE, tag_request, world, &pending, &status), "MPI_Iprobe");
      if (!pending) break;
      std::vector<double> r(request_size);
      check(MPI_Recv(r.data(), request_size, MPI_DOUBLE, status.MPI_SOURCE, tag_request, world,
                     MPI_STATUS_IGNORE),
            "MPI_Recv");
      const int from = static_cast<int>(r[0]);
      TrialOutcome outcome = decode_outcome(r);
      if (r[7] > 0) {
        outcome.reason.resize(static_cast<std::size_t>(r[7]));
        check(MPI_Recv(outcome.reason.data(), static_cast<int>(r[7]), MPI_CHAR, status.MPI_SOURCE,
                       tag_reason, world, MPI_STATUS_IGNORE),
              "MPI_Recv");
      }
      if (r[1] >= 0) coord->result(from, static_cast<int>(r[1]), outcome);
      waiting.push_back(from);
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

  std::optional<std::pair<int, TrialOutcome>> last;
  while (true) {
    // The group's leader obtains the next assignment; the coordinator from itself.
    if (leader && coordinator) {
      if (last) coord->result(group, last->first, last->second);
      last.reset();
      serve();  // the result may have let waiting groups go on
      std::optional<std::vector<double>> a;
      while (!(a = coord->next_for(group))) {
        serve();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      assignment = *a;
    } else if (leader) {
      const auto r = encode_request(group, last);
      check(MPI_Send(r.data(), request_size, MPI_DOUBLE, 0, tag_request, world), "MPI_Send");
      if (last && !last->second.reason.empty())
        check(MPI_Send(last->second.reason.data(), static_cast<int>(last->second.reason.size()),
                       MPI_CHAR, 0, tag_reason, world),
              "MPI_Send");
      MPI_Request answer = MPI_REQUEST_NULL;
      check(MPI_Irecv(assignment.data(), static_cast<int>(assignment.size()), MPI_DOUBLE, 0,
                      tag_assign, world, &answer),
            "MPI_Irecv");
      wait_without_spinning(answer, "MPI_Irecv");
      last.reset();
    }
    // The other ranks of the group wait here while the leader waits for the coordinator.
    MPI_Request shared = MPI_REQUEST_NULL;
    check(MPI_Ibcast(assignment.data(), static_cast<int>(assignment.size()), MPI_DOUBLE, 0, member,
                     &shared),
          "MPI_Ibcast");
    wait_without_spinning(shared, "MPI_Ibcast");
    if (assignment[0] == stop_id) break;
    const Trial trial = decode_trial(assignment);
    const auto t0 = Clock::now();
    TrialOutcome outcome;
    try {
      outcome = evaluate(trial, serve_during_trial);
    } catch (const CoordinatorFailed&) {
      std::rethrow_exception(coordinator_error);
    }
    stats.busy_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    outcome.member_group = group;
    last = std::make_pair(trial.id, outcome);
  }
  // The coordinator stays until every other group has been told to stop.
  if (coordinator)
    while (coord->stopped() < groups) {
      serve();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  stats.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace strata
