#include "parallel/mpi_request.hpp"

#include <cstdio>
#include <utility>

#include <fmt/format.h>

namespace strata {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error code {}", code);
  return std::string(text, static_cast<std::size_t>(length));
}

MpiError::MpiError(std::string op, std::string communicator, int rank, int code,
                   const std::string& detail)
    : std::runtime_error(fmt::format("{} failed on communicator '{}' (rank {}): {}", op,
                                     communicator, rank, detail)),
      op_(std::move(op)),
      communicator_(std::move(communicator)),
      rank_(rank),
      code_(code) {}

Request::Request(MPI_Request request, const char* op, std::string communicator, int rank,
                 int expected_count, std::shared_ptr<Watchdog> watchdog, WaitInfo info,
                 MPI_Datatype count_type)
    : request_(request),
      op_(op),
      communicator_(std::move(communicator)),
      rank_(rank),
      expected_count_(expected_count),
      count_type_(count_type),
      watchdog_(std::move(watchdog)),
      info_(info) {}

Request::Request(Request&& other) noexcept
    : request_(std::exchange(other.request_, MPI_REQUEST_NULL)),
      op_(other.op_),
      communicator_(std::move(other.communicator_)),
      rank_(other.rank_),
      expected_count_(other.expected_count_),
      count_type_(other.count_type_),
      watchdog_(std::move(other.watchdog_)),
      info_(other.info_) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this == &other) return *this;
  // The operation this request tracks may still use its buffers: finish it before forgetting it.
  Request finished(std::move(*this));
  (void)finished;  // its destructor waits
  request_ = std::exchange(other.request_, MPI_REQUEST_NULL);
  op_ = other.op_;
  communicator_ = std::move(other.communicator_);
  rank_ = other.rank_;
  expected_count_ = other.expected_count_;
  count_type_ = other.count_type_;
  watchdog_ = std::move(other.watchdog_);
  info_ = other.info_;
  return *this;
}

Request::~Request() {
  if (done()) return;
  try {
    wait();
  } catch (const std::exception& e) {
    // A destructor must not throw (it may run during unwinding); say what went wrong instead.
    std::fprintf(stderr, "strata: error while completing a request in its destructor: %s\n",
                 e.what());
  }
}

void Request::wait() {
  if (done()) return;
  MPI_Status status{};
  const int rc =
      watchdog_ ? watchdog_->wait(request_, status, info_) : MPI_Wait(&request_, &status);
  finish(rc, true, status);
}

bool Request::test() {
  if (done()) return true;
  MPI_Status status{};
  int flag = 0;
  const int rc = MPI_Test(&request_, &flag, &status);
  finish(rc, flag != 0, status);
  return done();
}

void Request::finish(int rc, bool completed, const MPI_Status& status) {
  if (rc != MPI_SUCCESS) {
    // After a failed completion the request's state is undefined; never wait on it again (the
    // destructor would block or fail a second time).
    request_ = MPI_REQUEST_NULL;
    throw MpiError(op_, communicator_, rank_, rc, mpi_error_text(rc));
  }
  if (!completed || expected_count_ < 0) return;
  int received = 0;
  const int count_rc = MPI_Get_count(&status, count_type_, &received);
  if (count_rc != MPI_SUCCESS)
    throw MpiError("MPI_Get_count", communicator_, rank_, count_rc, mpi_error_text(count_rc));
  if (received != expected_count_)
    throw MpiError(op_, communicator_, rank_, MPI_ERR_COUNT,
                   fmt::format("expected {} {} from rank {} (tag {}), received {}", expected_count_,
                               count_type_ == MPI_BYTE ? "bytes" : "floats", status.MPI_SOURCE,
                               status.MPI_TAG, received));
}

void wait_all(std::span<Request> requests) {
  for (Request& r : requests) r.wait();
}

}  // namespace strata
