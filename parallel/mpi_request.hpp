// MPI errors as exceptions, and the RAII handle of a non-blocking MPI operation.
#pragma once

#include <mpi.h>

#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "parallel/watchdog.hpp"

namespace strata {

class Communicator;

// An MPI call returned an error code. what() names the operation, the communicator, the rank
// and MPI's own description of the error.
class MpiError : public std::runtime_error {
 public:
  MpiError(std::string op, std::string communicator, int rank, int code, const std::string& detail);

  const std::string& op() const { return op_; }
  const std::string& communicator() const { return communicator_; }
  int rank() const { return rank_; }
  int code() const { return code_; }  // the MPI error code (MPI_ERR_*)

 private:
  std::string op_;
  std::string communicator_;
  int rank_;
  int code_;
};

// A non-blocking operation in flight: move-only RAII over MPI_Request.
//
// The buffers handed to the call that made the request must stay alive and untouched until the
// request is done. To make that hard to get wrong, the destructor of a request that is still
// active WAITS for it: MPI may still read or write the buffer, and a collective cannot be
// cancelled, so neither freeing the request nor leaking it is safe. (If the other ranks never
// join the collective this wait blocks, and the watchdog, if any, reports it.) Errors seen
// by the destructor cannot be thrown and are printed to stderr; call wait() to get them as an
// MpiError.
class Request {
 public:
  Request() = default;  // an already-done request
  ~Request();
  Request(Request&& other) noexcept;
  Request& operator=(
      Request&& other) noexcept;  // waits for this request first, like the destructor
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // Blocks until the operation completes; throws MpiError if it failed. No-op when done(). With a
  // watchdog, reports while it waits longer than the limit.
  void wait();
  // Completes the operation if it has finished; returns done(). Throws MpiError if it failed.
  bool test();
  // True once completed by wait() or test() (and for a default-constructed request).
  bool done() const { return request_ == MPI_REQUEST_NULL; }

 private:
  friend class Communicator;
  Request(MPI_Request request, const char* op, std::string communicator, int rank,
          int expected_count, std::shared_ptr<Watchdog> watchdog, WaitInfo info,
          MPI_Datatype count_type = MPI_FLOAT);
  // Checks the outcome of MPI_Wait/MPI_Test; `completed` says whether `status` is meaningful.
  void finish(int rc, bool completed, const MPI_Status& status);

  MPI_Request request_ = MPI_REQUEST_NULL;
  const char* op_ = "";       // a string literal such as "MPI_Iallreduce"
  std::string communicator_;  // for messages; the communicator may be freed before we complete
  int rank_ = -1;
  int expected_count_ = -1;              // elements an irecv must receive; -1 when not checked
  MPI_Datatype count_type_ = MPI_FLOAT;  // what expected_count_ counts
  std::shared_ptr<Watchdog> watchdog_;   // null: no watchdog, plain MPI_Wait
  WaitInfo info_;                        // for the watchdog's report
};

// Whether a destructor may release an MPI object whose release is collective (MPI_Win_free): not
// while an exception unwinds the stack, since this rank may be the only one leaving and the others
// would never join; the job must reach MPI_Abort instead (jobs/main.cpp), and the object is left
// to MPI.
inline bool may_release_collectively() {
  return std::uncaught_exceptions() == 0;
}

// Completes every request, in order. Waiting on them one by one cannot deadlock: all of them are
// already started, and MPI progresses every pending operation while a rank blocks in MPI_Wait.
// If one fails its MpiError is thrown; the requests after it stay active (their destructors wait).
void wait_all(std::span<Request> requests);

// MPI's own description of an error code.
std::string mpi_error_text(int code);

}  // namespace strata
