#include "parallel/failure_agreement.hpp"

#include <exception>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

namespace {

// What crosses the group: the error's kind as one leading character, then its message.
enum class FailureKind : char {
  config = 'c',
  mismatch = 'm',
  data = 'd',
  diverged = 'n',
  other = 'o'
};

[[noreturn]] void throw_as(FailureKind kind, const std::string& message) {
  switch (kind) {
    case FailureKind::config:
      throw ConfigError(message);
    case FailureKind::mismatch:
      throw CheckpointMismatch(message);
    case FailureKind::data:
      throw DataError(message);
    case FailureKind::diverged:
      throw DivergedError(message);
    case FailureKind::other:
      break;
  }
  throw std::runtime_error(message);
}

}  // namespace

void agree_on_failure(const Communicator& group, const std::function<void()>& local) {
  std::exception_ptr error;
  std::string failure;  // kind character + message
  try {
    local();
  } catch (const ConfigError& e) {
    error = std::current_exception();
    failure = static_cast<char>(FailureKind::config) + std::string(e.what());
  } catch (const CheckpointMismatch& e) {
    error = std::current_exception();
    failure = static_cast<char>(FailureKind::mismatch) + std::string(e.what());
  } catch (const DataError& e) {
    error = std::current_exception();
    failure = static_cast<char>(FailureKind::data) + std::string(e.what());
  } catch (const DivergedError& e) {
    error = std::current_exception();
    failure = static_cast<char>(FailureKind::diverged) + std::string(e.what());
  } catch (const std::exception& e) {
    error = std::current_exception();
    failure = static_cast<char>(FailureKind::other) + std::string(e.what());
  } catch (...) {
    // Whatever it is, this rank must still join the agreement below, or its peers wait there.
    error = std::current_exception();
    failure = static_cast<char>(FailureKind::other) + std::string("an unknown error");
  }
  if (group.size() == 1) {
    if (error) std::rethrow_exception(error);
    return;
  }
  const int first_failing = group.allreduce_min(error ? group.rank() : group.size());
  if (first_failing == group.size()) return;
  group.broadcast_string(failure, first_failing);
  const auto kind = static_cast<FailureKind>(failure.front());
  const std::string message = failure.substr(1);
  if (first_failing == 0) throw_as(kind, message);
  throw_as(kind, fmt::format("rank {} of the {} group: {}", first_failing, group.name(), message));
}

}  // namespace strata
