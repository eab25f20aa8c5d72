// output.trace's file: every rank's timeline merged into one Chrome trace (trace.json), a track
// (pid) per world rank.
#pragma once

#include <filesystem>

#include "core/trace.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// Collective over `world`: each rank sends its events point to point to rank 0, which writes
// them to `path` (atomically) and prints where. Empty `path` on rank 0: nothing written.
void write_trace(const Communicator& world, const Trace& trace, const std::filesystem::path& path);

}  // namespace strata
