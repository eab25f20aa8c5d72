// Work that may fail on one rank of a group and not on the others, agreed on before the group's
// next collective, so that a failure leaves no rank waiting in a collective its peer never enters.
#pragma once

#include <functional>

#include "parallel/communicator.hpp"

namespace strata {

// Runs `local` on every rank of `group`, then agrees over it: if `local` threw on any rank, every
// rank throws the error of the lowest failing rank, of the same kind (ConfigError,
// CheckpointMismatch, DataError, DivergedError, else std::runtime_error) with the same message,
// prefixed by "rank R of the <group> group: " where R > 0. A group of one rank gets the original
// exception back. Collective over `group`; `local` may make collective calls of its own only if it
// cannot fail before them.
void agree_on_failure(const Communicator& group, const std::function<void()>& local);

}  // namespace strata
