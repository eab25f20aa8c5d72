// `strata calibrate CONFIG`: what the cost model of `strata plan --predict` needs, measured here.
#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/config.hpp"
#include "core/errors.hpp"
#include "jobs/calibration.hpp"
#include "jobs/commands.hpp"
#include "parallel/calibration_json.hpp"

namespace strata {

int calibrate_command(const CalibrateOptions& options) {
  const Config config = load_config(options.config_path, options.overrides);
  if (config.objective)
    throw ConfigError(
        fmt::format("{}: strata calibrate times a model; this config optimises the "
                    "{} function",
                    config.file, config.objective->name));
  const Communicator world = Communicator::world(config.parallel.watchdog_s);
  CalibrationOptions measure;
  measure.steps = options.steps;
  measure.repeats = options.repeats;
  const Calibration calibration = measure_calibration(config, world, measure);
  if (world.rank() == 0) {
    write_text_atomically(options.out, calibration_to_json(calibration).dump(2) + "\n");
    fmt::print("[calibrate] wrote {}: strata plan {} --ranks N --predict --calibration {}\n",
               options.out, options.config_path, options.out);
  }
  return 0;
}

}  // namespace strata
