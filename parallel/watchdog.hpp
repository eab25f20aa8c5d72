// The stall watchdog: a rank that waits in one MPI operation longer than a limit
// prints which operation, on which communicator, and which ranks of it have not arrived (like
// Horovod's stall inspector), and then keeps waiting, reporting again every limit.
//
// Who has not arrived. A watched communicator numbers its collectives: the k-th collective call
// on it is call #k on every rank, since all ranks make the same collective calls in the same order.
// On entering a collective a rank publishes its number in a counter that the other ranks can read
// without the rank's help (a late rank is typically computing, not calling MPI):
//  - ranks on the same node read it directly: the counters of a node live in node-shared memory
//    (MPI_Win_allocate_shared). Publishing is one atomic store, reading an atomic load.
//  - ranks on other nodes read it with MPI_Rget through a window over the whole communicator in
//    which every rank exposes its node's counters (MPI_Win_create). RDMA hardware answers that by
//    itself; without it (MPICH over shared memory or TCP) some rank of the target node must be
//    inside MPI, so the stuck rank asks every rank of the node (up to 8) and takes the first
//    answer. A node that does not answer within min(limit, 1 s) is listed as such.
// A rank waiting in call #k reports the ranks whose counter is below k.
//
// Waiting. A watched wait polls MPI_Test, busily (as MPI_Wait does) for the first millisecond and
// whenever the operation may be progressing: MPICH advances a non-blocking collective only inside
// MPI calls, and sleeping 20 us to 1 ms between tests made a 16 MiB allreduce 2 to 5 times slower.
// While a rank of this node that has not entered the collective holds it up, nothing completes, so
// it sleeps between tests, 1% of the time waited so far (20 us to 1 ms): it wakes at most that late
// after the rank arrives. After 100 ms (a stall elsewhere, or a transfer of hundreds of MB) it
// yields the core between tests, to ranks or threads that share it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace strata {

struct WatchdogSettings {
  double limit_s = 0;  // report a wait longer than this, and again every limit_s; 0 = no watchdog
  // Receives each report (one line, no newline); empty = print it to stderr.
  std::function<void(const std::string&)> report;
  // false: every rank counts as a node of its own, so that all counters are read through the RMA
  // window (tests the multi-node path on one node).
  bool share_node_memory = true;
  // More ranks on this node than it has cores: a waiting rank gives its core away at once instead
  // of polling first, since the rank it waits for may need that core to get anywhere.
  bool oversubscribed = false;

  bool enabled() const { return limit_s > 0; }
};

// What a watched wait is waiting for, for its report.
struct WaitInfo {
  const char* op = "";    // the MPI operation, e.g. "MPI_Allreduce"
  std::int64_t call = 0;  // the collective's number on its communicator; 0 for point to point
  int peer = -1;          // point to point: the other rank (MPI_ANY_SOURCE for any)
  int tag = 0;            // point to point
  bool sending = false;   // point to point: this rank sends to `peer`
};

// One communicator's watchdog: its collective counter, the windows through which the counters are
// read, and the watched wait. Created and closed collectively with its Communicator; requests
// share it, so that a request that outlives its communicator can still report (without counters).
class Watchdog {
 public:
  // Collective over `comm`, this rank being `rank` of `size` (`comm` returns errors). Throws
  // MpiError. settings->enabled() must hold.
  Watchdog(MPI_Comm comm, std::string name, int rank, int size,
           std::shared_ptr<const WatchdogSettings> settings);
  ~Watchdog();  // an open watchdog is closed with free == false
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  const std::shared_ptr<const WatchdogSettings>& settings() const { return settings_; }
  double limit_s() const { return settings_->limit_s; }

  // Numbers the next collective on the communicator and publishes that this rank has entered it.
  std::int64_t enter() noexcept {
    ++calls_;
    if (mine_ != nullptr) publish(calls_);
    return calls_;
  }
  // Frees the windows: collective over the communicator, in its order of destruction. With free
  // false (stack unwinding after an error on this rank alone: the other ranks may never join) it
  // makes no MPI call and leaks them, for MPI_Abort to reclaim, as strata ends a multi-rank job
  // after any error. (MPI_Finalize copes with a leaked node window; with MPICH over UCX it aborts
  // on a leaked window over several nodes.)
  void close(bool free) noexcept;

  // Completes `request` as MPI_Wait does (returns its error code, fills `status`), reporting to the
  // settings' reporter while it waits longer than the limit.
  int wait(MPI_Request& request, MPI_Status& status, const WaitInfo& what);

 private:
  struct Peer {
    int node = 0;        // index into nodes_
    int slot = 0;        // rank within its node: the index of its counter there
    int world_rank = 0;  // in MPI_COMM_WORLD
  };
  struct Node {
    std::vector<int> ranks;              // communicator ranks, by slot
    std::vector<std::int64_t> counters;  // as last read (other nodes)
    bool answered = false;               // counters read in the current inquiry
  };
  struct Probe {  // an MPI_Rget of a node's counters from one of its ranks
    int node = 0;
    int target = 0;  // communicator rank asked
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::int64_t> buffer;
  };

  void publish(std::int64_t call) noexcept;
  std::int64_t local_counter(int slot) const noexcept;
  // True if a rank of this node has not yet entered collective `call`.
  bool local_rank_late(std::int64_t call) const noexcept;
  // Starts reading the counters of the other nodes; poll_inquiry() says when every node answered.
  void start_inquiry();
  bool poll_inquiry();
  std::string describe(double waited_s, const WaitInfo& what) const;
  void report(const std::string& line) const;

  std::shared_ptr<const WatchdogSettings> settings_;
  std::string name_;
  int rank_ = -1;
  int size_ = 0;
  int world_rank_ = -1;
  std::int64_t calls_ = 0;
  bool open_ = false;
  MPI_Win shared_ = MPI_WIN_NULL;     // this node's counters
  MPI_Win remote_ = MPI_WIN_NULL;     // every node's counters; MPI_WIN_NULL on a single node
  std::int64_t* counters_ = nullptr;  // this node's counters, by slot
  std::int64_t* mine_ = nullptr;      // this rank's counter
  std::vector<Peer> peers_;           // by communicator rank
  std::vector<Node> nodes_;
  int my_node_ = 0;
  std::vector<Probe> probes_;
  std::string inquiry_error_;  // set when reading other nodes failed; they are no longer asked
};

}  // namespace strata
