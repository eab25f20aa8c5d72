#include "jobs/trace_file.hpp"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"

namespace strata {

namespace {

constexpr int size_tag = 7400, events_tag = 7401;

}  // namespace

void write_trace(const Communicator& world, const Trace& trace, const std::filesystem::path& path) {
  const std::string mine = trace.events_json(world.rank(), fmt::format("rank {}", world.rank()));
  if (world.rank() != 0) {
    const std::uint64_t size = mine.size();
    Request sent_size = world.isend_bytes(std::as_bytes(std::span(&size, 1)), 0, size_tag);
    Request sent = world.isend_bytes(std::as_bytes(std::span(mine)), 0, events_tag);
    sent_size.wait();
    sent.wait();
    return;
  }
  // Rank 0 takes every rank's events in rank order, so that a large trace is never held whole.
  std::int64_t dropped = trace.dropped();
  replace_atomically(path, [&](const std::filesystem::path& temporary) {
    std::ofstream out(temporary);
    out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[" << mine;
    std::string theirs;
    for (int rank = 1; rank < world.size(); ++rank) {
      std::uint64_t size = 0;
      world.irecv_bytes(std::as_writable_bytes(std::span(&size, 1)), rank, size_tag).wait();
      theirs.resize(size);
      world.irecv_bytes(std::as_writable_bytes(std::span(theirs)), rank, events_tag).wait();
      out << ',' << theirs;
    }
    out << "]}\n";
    out.flush();
    if (!out) throw DataError(fmt::format("cannot write the trace {}", temporary.string()));
  });
  fmt::print("[run] trace of {} rank(s) in {} (open it in https://ui.perfetto.dev){}\n",
             world.size(), path.string(),
             dropped > 0 ? fmt::format("; {} events past the first {} left out on rank 0", dropped,
                                       Trace::max_events)
                         : "");
  std::fflush(stdout);
}

}  // namespace strata
