// Error types that map to strata's exit codes (README "Exit codes").
#pragma once

#include <stdexcept>
#include <string>

namespace strata {

enum ExitCode : int {
  exit_ok = 0,
  exit_usage = 2,
  exit_data = 3,
  exit_checkpointed = 75,
  exit_internal = 1
};

// Bad command line or configuration: exit code 2.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Missing or damaged dataset, weights file or checkpoint: exit code 3.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A readable checkpoint of another model (a tensor of another shape): exit code 3. A resume reports
// it rather than skipping it as damaged.
class CheckpointMismatch : public DataError {
 public:
  using DataError::DataError;
};

// The loss became NaN or infinite: the training cannot go on (exit code 1; a search records it as
// failed).
class DivergedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every trial of a search failed, so it has no result to publish: exit code 1.
class SearchFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stop signal arrived and the training state was checkpointed: exit code 75, "requeue me".
class Interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace strata
