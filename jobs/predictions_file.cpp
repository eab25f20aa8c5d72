#include "jobs/predictions_file.hpp"

#include "core/atomic_file.hpp"
#include "core/hdf5_file.hpp"

namespace strata {

void write_predictions(const std::filesystem::path& path, const SetPredictions& p) {
  replace_atomically(path, [&](const std::filesystem::path& temporary) {
    h5::File::write_new(temporary.string(), [&](h5::File& file) {
      file.write_attr_string("/", "format", "strata-predictions");
      file.write_attr_int("/", "classes", p.classes);
      file.write_f32("/validation",
                     {static_cast<std::int64_t>(p.validation.size()) / p.classes, p.classes},
                     p.validation.data());
      file.write_f32("/test", {static_cast<std::int64_t>(p.test.size()) / p.classes, p.classes},
                     p.test.data());
    });
  });
}

SetPredictions read_predictions(const std::string& path) {
  const auto file = h5::File::open_read(path);
  SetPredictions p;
  p.classes = static_cast<int>(file.read_attr_int("/", "classes"));
  file.read_f32("/validation", p.validation);
  file.read_f32("/test", p.test);
  return p;
}

}  // namespace strata
