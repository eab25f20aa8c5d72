#include "hpo/trial_guard.hpp"

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

namespace {

TrialOutcome failed(std::string reason) {
  TrialOutcome o;
  o.status = TrialStatus::failed;
  o.reason = std::move(reason);
  return o;
}

}  // namespace

TrialOutcome run_guarded_trial(const Communicator& member, int trial_id,
                               const std::function<void()>& build,
                               const std::function<TrialOutcome()>& train) {
  std::string build_error;
  bool threw = false;
  try {
    build();
  } catch (const std::exception& e) {
    threw = true;
    build_error = e.what();
  } catch (...) {
    // Whatever it is, this rank must still join the agreement below, or its peers wait there.
    threw = true;
    build_error = "an unknown error";
  }
  if (member.size() > 1) {
    const int first_failing = member.allreduce_min(threw ? member.rank() : member.size());
    if (first_failing < member.size()) {
      member.broadcast_string(build_error, first_failing);
      if (first_failing > 0)
        build_error = fmt::format("rank {} of the member group: {}", first_failing, build_error);
      threw = true;
    }
  }
  if (threw) return failed(std::move(build_error));

  try {
    return train();
  } catch (const Interrupted&) {
    throw;  // a stop signal, agreed on by the whole group: not the trial's failure
  } catch (const DataError&) {
    throw;  // a full disk or a damaged file: the job's trouble, not the trial's
  } catch (const DivergedError& e) {
    return failed(e.what());
  } catch (const ConfigError& e) {
    return failed(e.what());
  } catch (const std::exception& e) {
    if (member.size() > 1)
      throw std::runtime_error(fmt::format(
          "trial {}: {} (on one rank of a member group of {}: the job stops, as the other ranks "
          "may wait for it in a collective)",
          trial_id, e.what(), member.size()));
    return failed(fmt::format("error: {}", e.what()));
  }
}

}  // namespace strata
