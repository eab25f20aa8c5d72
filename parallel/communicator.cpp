#include "parallel/communicator.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace strata {

Communicator Communicator::adopt(MPI_Comm comm, std::string name,
                                 std::shared_ptr<const WatchdogSettings> watchdog) {
  Communicator c(comm, std::move(name));
  if (!c.valid()) return c;
  // Without this, any MPI error would abort the whole job with no word on which call failed.
  c.check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  c.check(MPI_Comm_rank(comm, &c.rank_), "MPI_Comm_rank");
  c.check(MPI_Comm_size(comm, &c.size_), "MPI_Comm_size");
  if (watchdog && watchdog->enabled())
    c.watchdog_ = std::make_shared<Watchdog>(comm, c.name_, c.rank_, c.size_, std::move(watchdog));
  return c;
}

Communicator::~Communicator() {
  release();
}

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
      name_(std::move(other.name_)),
      rank_(std::exchange(other.rank_, -1)),
      size_(std::exchange(other.size_, 0)),
      watchdog_(std::move(other.watchdog_)) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this == &other) return *this;
  release();
  comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
  name_ = std::move(other.name_);
  rank_ = std::exchange(other.rank_, -1);
  size_ = std::exchange(other.size_, 0);
  watchdog_ = std::move(other.watchdog_);
  return *this;
}

void Communicator::release() noexcept {
  if (comm_ == MPI_COMM_NULL) return;
  // Freeing after MPI_Finalize is erroneous; by then MPI has released everything anyway.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (watchdog_) {
    // Freeing its windows is collective. Requests keep the (closed) watchdog for their reports.
    watchdog_->close(!finalized && may_release_collectively());
    watchdog_.reset();
  }
  // We only ever hold handles we created (world() duplicates), so this never frees WORLD/SELF.
  // MPI_Comm_free is safe with operations pending: MPI releases the communicator after them.
  if (!finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
  rank_ = -1;
  size_ = 0;
}

Communicator Communicator::world(double watchdog_s) {
  return world(WatchdogSettings{watchdog_s, {}, true});
}

Communicator Communicator::world(WatchdogSettings watchdog) {
  if (!std::isfinite(watchdog.limit_s) || watchdog.limit_s < 0)
    throw std::invalid_argument(
        fmt::format("the watchdog limit must be a number of seconds >= 0 (0 = none), got {}",
                    watchdog.limit_s));
  MPI_Comm dup = MPI_COMM_NULL;
  // MPI_COMM_WORLD's handler is still the default (fatal) one here: a failure aborts the job.
  const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  if (rc != MPI_SUCCESS) throw MpiError("MPI_Comm_dup", "world", -1, rc, mpi_error_text(rc));
  // Ranks that share this node, against its cores (all of them, whatever each rank's binding).
  MPI_Comm node = MPI_COMM_NULL;
  int ranks_on_node = 1;
  if (MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &ranks_on_node);
    MPI_Comm_free(&node);
  }
  watchdog.oversubscribed =
      ranks_on_node > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return adopt(dup, "world", std::make_shared<const WatchdogSettings>(std::move(watchdog)));
}

Communicator Communicator::split(int color, int key, std::string name) const {
  MPI_Comm out = MPI_COMM_NULL;
  check(MPI_Comm_split(live("MPI_Comm_split"), color, key, &out), "MPI_Comm_split");
  return adopt(out, std::move(name), watchdog_settings());
}

Communicator Communicator::split_shared(std::string name) const {
  MPI_Comm out = MPI_COMM_NULL;
  check(MPI_Comm_split_type(live("MPI_Comm_split_type"), MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL,
                            &out),
        "MPI_Comm_split_type");
  return adopt(out, std::move(name), watchdog_settings());
}

void Communicator::check(int rc, const char* op) const {
  if (rc != MPI_SUCCESS) throw MpiError(op, name_, rank_, rc, mpi_error_text(rc));
}

MPI_Comm Communicator::live(const char* op) const {
  if (comm_ == MPI_COMM_NULL)
    throw std::logic_error(fmt::format(
        "{} on communicator '{}', which this rank is not part of (MPI_COMM_NULL)", op, name_));
  return comm_;
}

int Communicator::count(std::size_t n, const char* op) const {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument(
        fmt::format("{} on communicator '{}' (rank {}): {} elements exceed MPI's int count", op,
                    name_, rank_, n));
  return static_cast<int>(n);
}

void Communicator::check_blocks(std::size_t whole, std::size_t part, const char* op,
                                const char* whole_name, const char* part_name) const {
  live(op);
  if (whole != part * static_cast<std::size_t>(size_))
    throw std::invalid_argument(fmt::format(
        "{} on communicator '{}' (rank {}): {} has {} elements, expected {} ({} x {} ranks)", op,
        name_, rank_, whole_name, whole, part * static_cast<std::size_t>(size_), part_name, size_));
}

Request Communicator::make_request(MPI_Request request, const char* op, std::int64_t call) const {
  return Request(request, op, name_, rank_, -1, watchdog_, WaitInfo{op, call});
}

Request Communicator::make_p2p_request(MPI_Request request, const char* op, int peer, int tag,
                                       bool sending, int expected_count) const {
  return Request(request, op, name_, rank_, expected_count, watchdog_,
                 WaitInfo{op, 0, peer, tag, sending});
}

template <class Blocking, class Start>
void Communicator::collective(const char* op, Blocking&& blocking, Start&& start) const {
  if (!watchdog_) {
    check(blocking(), op);
    return;
  }
  const std::int64_t call = watchdog_->enter();
  MPI_Request r = MPI_REQUEST_NULL;
  check(start(&r), op);
  make_request(r, op, call).wait();
}

void Communicator::barrier() const {
  const MPI_Comm c = live("MPI_Barrier");
  collective(
      "MPI_Barrier", [&] { return MPI_Barrier(c); },
      [&](MPI_Request* r) { return MPI_Ibarrier(c, r); });
}

// ---- blocking collectives

namespace {

// MPI_Allreduce in place, or its non-blocking version.
template <class T>
auto allreduce_in_place(T* values, int n, MPI_Datatype type, MPI_Op reduce, MPI_Comm c) {
  return std::pair(
      [=] { return MPI_Allreduce(MPI_IN_PLACE, values, n, type, reduce, c); },
      [=](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, values, n, type, reduce, c, r); });
}

}  // namespace

void Communicator::allreduce_sum(std::span<float> values) const {
  const char* op = "MPI_Allreduce";
  const auto [blocking, start] =
      allreduce_in_place(values.data(), count(values.size(), op), MPI_FLOAT, MPI_SUM, live(op));
  collective(op, blocking, start);
}

int Communicator::allreduce_max(int value) const {
  const char* op = "MPI_Allreduce";
  const auto [blocking, start] = allreduce_in_place(&value, 1, MPI_INT, MPI_MAX, live(op));
  collective(op, blocking, start);
  return value;
}

int Communicator::allreduce_min(int value) const {
  const char* op = "MPI_Allreduce";
  const auto [blocking, start] = allreduce_in_place(&value, 1, MPI_INT, MPI_MIN, live(op));
  collective(op, blocking, start);
  return value;
}

std::int64_t Communicator::allreduce_sum_int64(std::int64_t value) const {
  const char* op = "MPI_Allreduce";
  const auto [blocking, start] = allreduce_in_place(&value, 1, MPI_INT64_T, MPI_SUM, live(op));
  collective(op, blocking, start);
  return value;
}

double Communicator::allreduce_sum_double(double value) const {
  const char* op = "MPI_Allreduce";
  const auto [blocking, start] = allreduce_in_place(&value, 1, MPI_DOUBLE, MPI_SUM, live(op));
  collective(op, blocking, start);
  return value;
}

void Communicator::allreduce_sum(std::span<double> values) const {
  const char* op = "MPI_Allreduce";
  const auto [blocking, start] =
      allreduce_in_place(values.data(), count(values.size(), op), MPI_DOUBLE, MPI_SUM, live(op));
  collective(op, blocking, start);
}

void Communicator::allgather(std::span<const float> mine, std::span<float> all) const {
  const char* op = "MPI_Allgather";
  check_blocks(all.size(), mine.size(), op, "the output", "the input");
  const int n = count(mine.size(), op);
  collective(
      op, [&] { return MPI_Allgather(mine.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, comm_); },
      [&](MPI_Request* r) {
        return MPI_Iallgather(mine.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, comm_, r);
      });
}

void Communicator::reduce_scatter_sum(std::span<const float> in, std::span<float> out) const {
  const char* op = "MPI_Reduce_scatter_block";
  check_blocks(in.size(), out.size(), op, "the input", "the output");
  const int n = count(out.size(), op);
  collective(
      op,
      [&] { return MPI_Reduce_scatter_block(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, comm_); },
      [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, comm_, r);
      });
}

namespace {

// MPI_Bcast, or its non-blocking version.
auto bcast(void* data, int n, MPI_Datatype type, int root, MPI_Comm c) {
  return std::pair([=] { return MPI_Bcast(data, n, type, root, c); },
                   [=](MPI_Request* r) { return MPI_Ibcast(data, n, type, root, c, r); });
}

}  // namespace

void Communicator::broadcast(std::span<float> values, int root) const {
  const char* op = "MPI_Bcast";
  const auto [blocking, start] =
      bcast(values.data(), count(values.size(), op), MPI_FLOAT, root, live(op));
  collective(op, blocking, start);
}

void Communicator::broadcast_string(std::string& text, int root) const {
  const char* op = "MPI_Bcast";
  // The length first, so that every rank can size its buffer for the bytes.
  std::uint64_t length = text.size();
  const auto [blocking, start] = bcast(&length, 1, MPI_UINT64_T, root, live(op));
  collective(op, blocking, start);
  text.resize(static_cast<std::size_t>(length));
  const auto [blocking_text, start_text] =
      bcast(text.data(), count(text.size(), op), MPI_CHAR, root, comm_);
  collective(op, blocking_text, start_text);
}

std::vector<std::string> Communicator::allgather_strings(const std::string& mine) const {
  const char* op = "MPI_Allgather";
  // Padded to the longest, so that one fixed-size allgather carries them all.
  const int longest = allreduce_max(count(mine.size(), op));
  std::vector<char> padded(static_cast<std::size_t>(longest), '\0');
  std::copy(mine.begin(), mine.end(), padded.begin());
  std::vector<char> all(padded.size() * static_cast<std::size_t>(size()));
  std::vector<int> lengths(static_cast<std::size_t>(size()));
  const int length = static_cast<int>(mine.size());
  const MPI_Comm c = live(op);
  collective(
      op, [&] { return MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, c); },
      [&](MPI_Request* r) {
        return MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, c, r);
      });
  collective(
      op,
      [&] {
        return MPI_Allgather(padded.data(), longest, MPI_CHAR, all.data(), longest, MPI_CHAR, c);
      },
      [&](MPI_Request* r) {
        return MPI_Iallgather(padded.data(), longest, MPI_CHAR, all.data(), longest, MPI_CHAR, c,
                              r);
      });
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(size()));
  for (int k = 0; k < size(); ++k)
    out.emplace_back(all.data() + static_cast<std::size_t>(k) * padded.size(),
                     static_cast<std::size_t>(lengths[static_cast<std::size_t>(k)]));
  return out;
}

// ---- point to point

void Communicator::send(std::span<const float> values, int dest, int tag) const {
  const char* op = "MPI_Send";
  const int n = count(values.size(), op);
  const MPI_Comm c = live(op);
  if (!watchdog_) {
    check(MPI_Send(values.data(), n, MPI_FLOAT, dest, tag, c), op);
    return;
  }
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Isend(values.data(), n, MPI_FLOAT, dest, tag, c, &r), op);
  make_p2p_request(r, op, dest, tag, true, -1).wait();
}

void Communicator::recv(std::span<float> values, int source, int tag) const {
  const char* op = "MPI_Recv";
  const int n = count(values.size(), op);
  if (watchdog_) {
    // The request checks the length it receives, as below.
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Irecv(values.data(), n, MPI_FLOAT, source, tag, live(op), &r), op);
    make_p2p_request(r, op, source, tag, false, n).wait();
    return;
  }
  MPI_Status status{};
  check(MPI_Recv(values.data(), n, MPI_FLOAT, source, tag, live(op), &status), op);
  int received = 0;
  check(MPI_Get_count(&status, MPI_FLOAT, &received), "MPI_Get_count");
  // A longer message is already an MPI error (truncation); a shorter one would pass silently.
  if (received != n)
    throw MpiError(op, name_, rank_, MPI_ERR_COUNT,
                   fmt::format("expected {} floats from rank {} (tag {}), received {}", n,
                               status.MPI_SOURCE, status.MPI_TAG, received));
}

}  // namespace strata
