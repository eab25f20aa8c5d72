#include "hpo/trial_guard.hpp"

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "parallel/failure_agreement.hpp"

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
  try {
    agree_on_failure(member, build);
  } catch (const MpiError&) {
    throw;  // the agreement itself failed: the group can no longer agree on anything
  } catch (const std::exception& e) {
    return failed(e.what());
  } catch (...) {
    return failed("an unknown error");
  }

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
