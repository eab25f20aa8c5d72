#include "parallel/watchdog.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "parallel/communicator.hpp"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto busy_polling = std::chrono::milliseconds(1);
constexpr auto shortest_sleep = std::chrono::microseconds(20);
constexpr auto longest_sleep = std::chrono::microseconds(1000);
constexpr auto spin_before_yield = std::chrono::milliseconds(100);
constexpr int ranks_asked_per_node = 8;
constexpr double longest_answer_wait_s = 1.0;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

Watchdog::Watchdog(MPI_Comm comm, std::string name, int rank, int size,
                   std::shared_ptr<const WatchdogSettings> settings)
    : settings_(std::move(settings)), name_(std::move(name)), rank_(rank), size_(size) {
  auto check = [&](int rc, const char* op) {
    if (rc != MPI_SUCCESS) throw MpiError(op, name_ + " (watchdog)", rank_, rc, mpi_error_text(rc));
  };
  check(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "MPI_Comm_rank");

  // This rank's node, and its counters there.
  MPI_Comm node = MPI_COMM_NULL;
  if (settings_->share_node_memory)
    check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
          "MPI_Comm_split_type");
  else
    check(MPI_Comm_split(comm, rank, 0, &node), "MPI_Comm_split");
  int slot = 0, node_size = 0, leader = rank;
  int rc = MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(node, &slot);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(node, &node_size);
  // The node's first rank names it, in communicator ranks.
  if (rc == MPI_SUCCESS) rc = MPI_Bcast(&leader, 1, MPI_INT, 0, node);
  if (rc == MPI_SUCCESS)
    rc = MPI_Win_allocate_shared(sizeof(std::int64_t), sizeof(std::int64_t), MPI_INFO_NULL, node,
                                 &mine_, &shared_);
  // The window keeps what it needs of the node communicator.
  MPI_Comm_free(&node);
  check(rc, "MPI_Win_allocate_shared");
  open_ = true;
  MPI_Win_set_errhandler(shared_, MPI_ERRORS_RETURN);
  MPI_Aint bytes = 0;
  int unit = 0;
  void* base = nullptr;
  check(MPI_Win_shared_query(shared_, 0, &bytes, &unit, &base), "MPI_Win_shared_query");
  counters_ = static_cast<std::int64_t*>(base);
  // MPI allocates the segments of a shared window back to back unless told otherwise.
  if (mine_ != counters_ + slot)
    throw MpiError("MPI_Win_allocate_shared", name_ + " (watchdog)", rank_, MPI_ERR_OTHER,
                   "the node's counters are not contiguous");
  publish(0);

  // Where every rank of the communicator is. The allgather also orders every rank's publish(0)
  // before any read of its counter.
  const int me[3] = {world_rank_, leader, slot};
  std::vector<int> all(static_cast<std::size_t>(3 * size));
  check(MPI_Allgather(me, 3, MPI_INT, all.data(), 3, MPI_INT, comm), "MPI_Allgather");
  std::map<int, int> node_of_leader;
  peers_.resize(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    const int* entry = &all[3 * static_cast<std::size_t>(r)];
    const auto [at, added] = node_of_leader.try_emplace(entry[1], static_cast<int>(nodes_.size()));
    if (added) nodes_.emplace_back();
    Peer& p = peers_[static_cast<std::size_t>(r)];
    p = {at->second, entry[2], entry[0]};
    Node& n = nodes_[static_cast<std::size_t>(p.node)];
    if (n.ranks.size() <= static_cast<std::size_t>(p.slot))
      n.ranks.resize(static_cast<std::size_t>(p.slot) + 1, -1);
    n.ranks[static_cast<std::size_t>(p.slot)] = r;
  }
  my_node_ = peers_[static_cast<std::size_t>(rank)].node;
  for (Node& n : nodes_) n.counters.assign(n.ranks.size(), 0);

  // Ranks of one node expose the same counters, so that any of them can answer for all of them.
  if (nodes_.size() > 1) {
    check(MPI_Win_create(counters_, static_cast<MPI_Aint>(node_size * sizeof(std::int64_t)),
                         sizeof(std::int64_t), MPI_INFO_NULL, comm, &remote_),
          "MPI_Win_create");
    MPI_Win_set_errhandler(remote_, MPI_ERRORS_RETURN);
    check(MPI_Win_lock_all(MPI_MODE_NOCHECK, remote_), "MPI_Win_lock_all");
  }
}

Watchdog::~Watchdog() {
  close(false);
}

void Watchdog::close(bool free) noexcept {
  if (!open_) return;
  open_ = false;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (free && !finalized) {
    if (remote_ != MPI_WIN_NULL) {
      // Completes the reads still in flight (every rank is inside MPI now, freeing the window).
      MPI_Win_unlock_all(remote_);
      for (Probe& p : probes_)
        if (p.request != MPI_REQUEST_NULL) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
      MPI_Win_free(&remote_);
    }
    MPI_Win_free(&shared_);
  } else {
    // Reads still in flight may land in the probes' buffers: keep them (the job is ending anyway).
    if (!probes_.empty()) new std::vector<Probe>(std::move(probes_));  // NOLINT: deliberate leak
  }
  probes_.clear();
  remote_ = shared_ = MPI_WIN_NULL;
  counters_ = mine_ = nullptr;
}

void Watchdog::publish(std::int64_t call) noexcept {
  std::atomic_ref<std::int64_t>(*mine_).store(call, std::memory_order_release);
}

std::int64_t Watchdog::local_counter(int slot) const noexcept {
  return std::atomic_ref<std::int64_t>(counters_[slot]).load(std::memory_order_acquire);
}

bool Watchdog::local_rank_late(std::int64_t call) const noexcept {
  if (!open_ || call == 0) return false;
  const auto& ranks = nodes_[static_cast<std::size_t>(my_node_)].ranks;
  for (std::size_t slot = 0; slot < ranks.size(); ++slot)
    if (local_counter(static_cast<int>(slot)) < call) return true;
  return false;
}

void Watchdog::start_inquiry() {
  for (Node& n : nodes_) n.answered = false;
  if (remote_ == MPI_WIN_NULL || !inquiry_error_.empty()) return;
  for (std::size_t node = 0; node < nodes_.size(); ++node) {
    if (static_cast<int>(node) == my_node_) continue;
    const auto& ranks = nodes_[node].ranks;
    for (std::size_t k = 0; k < ranks.size() && k < ranks_asked_per_node; ++k) {
      const int target = ranks[k];
      auto p = std::find_if(probes_.begin(), probes_.end(),
                            [&](const Probe& q) { return q.target == target; });
      if (p == probes_.end()) {
        probes_.push_back({static_cast<int>(node), target, MPI_REQUEST_NULL,
                           std::vector<std::int64_t>(ranks.size())});
        p = probes_.end() - 1;
      }
      if (p->request != MPI_REQUEST_NULL) continue;  // still asking since an earlier report
      const int n = static_cast<int>(p->buffer.size());
      const int rc = MPI_Rget(p->buffer.data(), n, MPI_INT64_T, target, 0, n, MPI_INT64_T, remote_,
                              &p->request);
      if (rc != MPI_SUCCESS) {
        inquiry_error_ = fmt::format("MPI_Rget failed: {}", mpi_error_text(rc));
        return;
      }
    }
  }
}

bool Watchdog::poll_inquiry() {
  bool all = true;
  for (Probe& p : probes_) {
    if (p.request == MPI_REQUEST_NULL) continue;
    int done = 0;
    const int rc = MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      p.request = MPI_REQUEST_NULL;
      inquiry_error_ = fmt::format("MPI_Rget failed: {}", mpi_error_text(rc));
      continue;
    }
    if (!done) continue;
    Node& n = nodes_[static_cast<std::size_t>(p.node)];
    n.counters = p.buffer;
    n.answered = true;
  }
  if (!inquiry_error_.empty()) return true;
  for (std::size_t node = 0; node < nodes_.size(); ++node)
    if (static_cast<int>(node) != my_node_ && !nodes_[node].answered) all = false;
  return all;
}

std::string Watchdog::describe(double waited_s, const WaitInfo& what) const {
  std::string line = fmt::format(
      "strata watchdog: rank {} (world rank {}) has waited {:.1f}s in {} "
      "on communicator '{}'",
      rank_, world_rank_, waited_s, what.op, name_);
  const auto world_of = [&](int r) { return peers_.empty() ? -1 : peers_[r].world_rank; };
  if (what.call == 0) {  // point to point
    if (what.peer == MPI_ANY_SOURCE)
      return line + fmt::format(" (from any rank, tag {})", what.tag);
    line += fmt::format(" ({} rank {}", what.sending ? "to" : "from", what.peer);
    if (what.peer >= 0 && what.peer < size_)
      line += fmt::format(" (world rank {})", world_of(what.peer));
    return line + fmt::format(", tag {})", what.tag);
  }
  line += fmt::format(" (call #{} on it); ", what.call);
  if (!open_) return line + "ranks not arrived: unknown (the communicator was freed)";
  std::vector<int> late, silent;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const Peer& p = peers_[static_cast<std::size_t>(r)];
    const Node& n = nodes_[static_cast<std::size_t>(p.node)];
    std::int64_t counter = 0;
    if (p.node == my_node_) {
      counter = local_counter(p.slot);
    } else if (n.answered) {
      counter = n.counters[static_cast<std::size_t>(p.slot)];
    } else {
      silent.push_back(r);
      continue;
    }
    if (counter < what.call) late.push_back(r);
  }
  const auto with_world = [&](const std::vector<int>& ranks) {
    std::vector<int> world;
    world.reserve(ranks.size());
    for (int r : ranks) world.push_back(world_of(r));
    return world == ranks ? fmt::format("[{}]", fmt::join(ranks, ", "))
                          : fmt::format("[{}] (world ranks [{}])", fmt::join(ranks, ", "),
                                        fmt::join(world, ", "));
  };
  line += "ranks not arrived: " + with_world(late);
  if (late.empty() && silent.empty())
    line += " (all have entered it: the operation itself is slow)";
  if (!silent.empty()) {
    line += "; no answer from the nodes of ranks " + with_world(silent) +
            " (none of their ranks is inside MPI: late, or busy after arriving)";
    if (!inquiry_error_.empty()) line += ": " + inquiry_error_;
  }
  return line;
}

void Watchdog::report(const std::string& line) const {
  if (settings_->report) {
    settings_->report(line);
    return;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

int Watchdog::wait(MPI_Request& request, MPI_Status& status, const WaitInfo& what) {
  int done = 0;
  int rc = MPI_Test(&request, &done, &status);
  if (rc != MPI_SUCCESS || done) return rc;
  const Clock::time_point start = Clock::now();
  // (A limit below a millisecond counts as one, so that reports cannot fill every iteration.)
  const Clock::duration limit =
      std::max<Clock::duration>(seconds(settings_->limit_s), std::chrono::milliseconds(1));
  Clock::time_point next_report = start + limit;
  Clock::time_point answers_due{};
  bool inquiring = false;
  for (;;) {
    rc = MPI_Test(&request, &done, &status);
    if (rc != MPI_SUCCESS || done) return rc;
    const Clock::time_point now = Clock::now();
    if (now >= next_report && !inquiring) {
      if (what.call != 0) start_inquiry();
      inquiring = true;
      answers_due = now + seconds(std::min(settings_->limit_s, longest_answer_wait_s));
    }
    if (inquiring && (what.call == 0 || poll_inquiry() || now >= answers_due)) {
      report(describe(std::chrono::duration<double>(now - start).count(), what));
      inquiring = false;
      next_report = std::max(next_report + limit, now + limit / 2);
    }
    const Clock::duration waited = now - start;
    if (waited < busy_polling && !settings_->oversubscribed) continue;
    if (local_rank_late(what.call)) {
      // Nothing completes before that rank arrives, and its arrival ends the sleeping: waking at
      // most 1% of the wait (or a few tens of microseconds) after it costs at most that much.
      std::this_thread::sleep_for(
          std::clamp<Clock::duration>(waited / 100, shortest_sleep, longest_sleep));
    } else if (settings_->oversubscribed || waited >= spin_before_yield) {
      sched_yield();  // lets ranks and threads that share this core run; no cost otherwise
    }
  }
}

}  // namespace strata
