// Communicator's non-blocking calls: each starts an MPI operation and returns the Request that
// finishes it, numbered for the stall watchdog like the blocking collectives.
#include "parallel/communicator.hpp"

namespace strata {

Request Communicator::iallreduce_sum(std::span<float> values) const {
  const char* op = "MPI_Iallreduce";
  MPI_Request r = MPI_REQUEST_NULL;
  const int n = count(values.size(), op);
  const MPI_Comm c = live(op);
  const std::int64_t call = enter();
  check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), n, MPI_FLOAT, MPI_SUM, c, &r), op);
  return make_request(r, op, call);
}

Request Communicator::iallgather(std::span<const float> mine, std::span<float> all) const {
  const char* op = "MPI_Iallgather";
  check_blocks(all.size(), mine.size(), op, "the output", "the input");
  const int n = count(mine.size(), op);
  MPI_Request r = MPI_REQUEST_NULL;
  const std::int64_t call = enter();
  check(MPI_Iallgather(mine.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, comm_, &r), op);
  return make_request(r, op, call);
}

Request Communicator::ireduce_scatter_sum(std::span<const float> in, std::span<float> out) const {
  const char* op = "MPI_Ireduce_scatter_block";
  check_blocks(in.size(), out.size(), op, "the input", "the output");
  const int n = count(out.size(), op);
  MPI_Request r = MPI_REQUEST_NULL;
  const std::int64_t call = enter();
  check(MPI_Ireduce_scatter_block(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, comm_, &r), op);
  return make_request(r, op, call);
}

Request Communicator::ibroadcast(std::span<float> values, int root) const {
  const char* op = "MPI_Ibcast";
  const int n = count(values.size(), op);
  const MPI_Comm c = live(op);
  MPI_Request r = MPI_REQUEST_NULL;
  const std::int64_t call = enter();
  check(MPI_Ibcast(values.data(), n, MPI_FLOAT, root, c, &r), op);
  return make_request(r, op, call);
}

Request Communicator::isend(std::span<const float> values, int dest, int tag) const {
  const char* op = "MPI_Isend";
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Isend(values.data(), count(values.size(), op), MPI_FLOAT, dest, tag, live(op), &r), op);
  return make_p2p_request(r, op, dest, tag, true, -1);
}

Request Communicator::irecv(std::span<float> values, int source, int tag) const {
  const char* op = "MPI_Irecv";
  const int n = count(values.size(), op);
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Irecv(values.data(), n, MPI_FLOAT, source, tag, live(op), &r), op);
  return make_p2p_request(r, op, source, tag, false, n);
}

// ---- control messages

Request Communicator::isend_bytes(std::span<const std::byte> bytes, int dest, int tag) const {
  const char* op = "MPI_Isend";
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Isend(bytes.data(), count(bytes.size(), op), MPI_BYTE, dest, tag, live(op), &r), op);
  return make_p2p_request(r, op, dest, tag, true, -1);
}

Request Communicator::irecv_bytes(std::span<std::byte> bytes, int source, int tag) const {
  const char* op = "MPI_Irecv";
  const int n = count(bytes.size(), op);
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Irecv(bytes.data(), n, MPI_BYTE, source, tag, live(op), &r), op);
  return Request(r, op, name_, rank_, n, watchdog_, WaitInfo{op, 0, source, tag, false}, MPI_BYTE);
}

Request Communicator::ibroadcast_bytes(std::span<std::byte> bytes, int root) const {
  const char* op = "MPI_Ibcast";
  const int n = count(bytes.size(), op);
  const MPI_Comm c = live(op);
  MPI_Request r = MPI_REQUEST_NULL;
  const std::int64_t call = enter();
  check(MPI_Ibcast(bytes.data(), n, MPI_BYTE, root, c, &r), op);
  return make_request(r, op, call);
}

bool Communicator::iprobe(int tag, int& source) const {
  const char* op = "MPI_Iprobe";
  int pending = 0;
  MPI_Status status{};
  check(MPI_Iprobe(MPI_ANY_SOURCE, tag, live(op), &pending, &status), op);
  if (pending) source = status.MPI_SOURCE;
  return pending != 0;
}

}  // namespace strata
