// RAII over MPI communicators (their requests: parallel/mpi_request.hpp).
//
// Every communicator strata uses ("world", "member", "data", "model", "peers", ...) is a
// Communicator that owns its MPI_Comm, returns MPI errors instead of aborting, and turns each
// failed call into an MpiError naming the operation, the communicator and the rank. Argument
// mistakes that MPI cannot see (buffer sizes that do not match) throw std::invalid_argument
// before any MPI call, so a rank never enters a collective the others will not match.
//
// Communicators and requests must be destroyed before MPI_Finalize.
//
// With a watchdog (WatchdogSettings::limit_s > 0; see parallel/watchdog.hpp) every
// wait on an operation is watched: a rank that waits longer than the limit reports the operation
// and the ranks that have not arrived. Blocking collectives and point-to-point calls then run as
// their non-blocking version plus a watched wait; without one they are the plain blocking MPI
// calls.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "parallel/mpi_request.hpp"
#include "parallel/watchdog.hpp"

namespace strata {

// An owned MPI communicator. Move-only; the destructor frees it (MPI_Comm_free). A
// default-constructed or moved-from communicator, or the result of split() with color
// MPI_UNDEFINED on this rank, holds MPI_COMM_NULL: valid() is false, rank() is -1, size() is 0,
// and any operation on it throws std::logic_error.
//
// Counts are MPI ints: a buffer of more than INT_MAX floats throws std::invalid_argument.
class Communicator {
 public:
  Communicator() = default;
  ~Communicator();
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // A duplicate of MPI_COMM_WORLD, named "world". strata never uses (or frees) MPI_COMM_WORLD
  // itself, so its messages cannot mix with another library's. Collective over the world.
  // watchdog_s > 0 watches every wait on it and on the communicators split from it (0 = none);
  // a negative or non-finite limit throws std::invalid_argument.
  static Communicator world(double watchdog_s = 0);
  static Communicator world(WatchdogSettings watchdog);

  // Ranks with the same color form a new communicator, ordered by key (ties by rank here).
  // Color MPI_UNDEFINED gives this rank an invalid communicator. Collective. The new communicator
  // has this one's watchdog settings (its own counters: creating them is part of the collective).
  Communicator split(int color, int key, std::string name) const;
  // The ranks of this communicator that share this rank's node (MPI_COMM_TYPE_SHARED). Collective.
  Communicator split_shared(std::string name) const;

  bool valid() const { return comm_ != MPI_COMM_NULL; }
  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm handle() const { return comm_; }
  // The watchdog's limit in seconds; 0 when there is none.
  double watchdog_s() const { return watchdog_ ? watchdog_->limit_s() : 0.0; }

  void barrier() const;

  // ---- blocking collectives ----
  // Sums `values` element-wise over all ranks, in place.
  void allreduce_sum(std::span<float> values) const;
  void allreduce_sum(Tensor& t) const { allreduce_sum(t.values()); }
  // Small helpers for agreeing on a value (a flag, a count, a step) across ranks.
  int allreduce_max(int value) const;
  int allreduce_min(int value) const;
  std::int64_t allreduce_sum_int64(std::int64_t value) const;
  double allreduce_sum_double(double value) const;
  // Sums a few doubles at once (a step's statistics): one collective, not one per value.
  void allreduce_sum(std::span<double> values) const;
  // Rank r's `mine` lands in all[r*n, (r+1)*n), n = mine.size(); needs all.size() == n*size().
  // `mine` must not overlap `all`.
  void allgather(std::span<const float> mine, std::span<float> all) const;
  // Sums `in` over all ranks and keeps block rank() of the sum: out = sum[rank*n, (rank+1)*n),
  // n = out.size(); needs in.size() == n*size().
  void reduce_scatter_sum(std::span<const float> in, std::span<float> out) const;
  // Root's `values` are copied to every rank; all ranks pass the same size.
  void broadcast(std::span<float> values, int root) const;
  void broadcast(Tensor& t, int root) const { broadcast(t.values(), root); }
  // Root's string (any bytes, any length) replaces `text` on every rank.
  void broadcast_string(std::string& text, int root) const;
  // Every rank's string (any bytes, any length), in rank order, on every rank.
  std::vector<std::string> allgather_strings(const std::string& mine) const;

  // ---- point to point ----
  void send(std::span<const float> values, int dest, int tag) const;
  // Receives exactly values.size() floats; a shorter or longer message throws MpiError.
  void recv(std::span<float> values, int source, int tag) const;

  // ---- non-blocking: same meaning as above; the buffers must outlive the Request ----
  [[nodiscard]] Request iallreduce_sum(std::span<float> values) const;
  [[nodiscard]] Request iallreduce_sum(Tensor& t) const { return iallreduce_sum(t.values()); }
  [[nodiscard]] Request iallgather(std::span<const float> mine, std::span<float> all) const;
  [[nodiscard]] Request ireduce_scatter_sum(std::span<const float> in, std::span<float> out) const;
  [[nodiscard]] Request ibroadcast(std::span<float> values, int root) const;
  [[nodiscard]] Request ibroadcast(Tensor& t, int root) const {
    return ibroadcast(t.values(), root);
  }
  [[nodiscard]] Request isend(std::span<const float> values, int dest, int tag) const;
  // Like recv(): completing with a message of another length throws MpiError from wait()/test().
  [[nodiscard]] Request irecv(std::span<float> values, int source, int tag) const;

  // ---- control messages (a search's requests and assignments): raw bytes of any type ----
  [[nodiscard]] Request isend_bytes(std::span<const std::byte> bytes, int dest, int tag) const;
  // Completes only with a message of exactly bytes.size() bytes (else MpiError).
  [[nodiscard]] Request irecv_bytes(std::span<std::byte> bytes, int source, int tag) const;
  [[nodiscard]] Request ibroadcast_bytes(std::span<std::byte> bytes, int root) const;
  // Whether a message with `tag` from any rank waits to be received; sets `source` if so.
  bool iprobe(int tag, int& source) const;

 private:
  // Takes ownership of `comm` without MPI calls, so that the destructor frees it if adopt() throws.
  Communicator(MPI_Comm comm, std::string name) noexcept : comm_(comm), name_(std::move(name)) {}
  // Owns `comm`: sets MPI_ERRORS_RETURN and caches rank and size; creates a watchdog (collective)
  // if `watchdog` is enabled.
  static Communicator adopt(MPI_Comm comm, std::string name,
                            std::shared_ptr<const WatchdogSettings> watchdog);
  std::shared_ptr<const WatchdogSettings> watchdog_settings() const {
    return watchdog_ ? watchdog_->settings() : nullptr;
  }
  void release() noexcept;

  // Throws MpiError describing `op` if rc is not MPI_SUCCESS.
  void check(int rc, const char* op) const;
  // The handle, or std::logic_error if this communicator is MPI_COMM_NULL.
  MPI_Comm live(const char* op) const;
  // `n` as an MPI count, or std::invalid_argument if it does not fit.
  int count(std::size_t n, const char* op) const;
  void check_blocks(std::size_t whole, std::size_t part, const char* op, const char* whole_name,
                    const char* part_name) const;
  // Numbers a collective for the watchdog as this rank enters it; 0 without a watchdog.
  std::int64_t enter() const { return watchdog_ ? watchdog_->enter() : 0; }
  // A request for collective number `call` (from enter()).
  Request make_request(MPI_Request request, const char* op, std::int64_t call) const;
  // A request for a point-to-point operation with `peer`.
  Request make_p2p_request(MPI_Request request, const char* op, int peer, int tag, bool sending,
                           int expected_count) const;
  // A blocking collective: `blocking()` (an MPI call) without a watchdog; with one,
  // `start(MPI_Request*)` (its non-blocking version) and a watched wait.
  template <class Blocking, class Start>
  void collective(const char* op, Blocking&& blocking, Start&& start) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string name_;
  int rank_ = -1;
  int size_ = 0;
  std::shared_ptr<Watchdog> watchdog_;  // null: no watchdog
};

}  // namespace strata
