// Model: end-to-end backprop through a small CNN, shape errors, seeded initialisation, and weights
// files (round trip, damaged files, and a file written by h5py).
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/hdf5_file.hpp"
#include "core/loss.hpp"
#include "core/model.hpp"
#include "core/pretrained.hpp"
#include "core/weights_io.hpp"
#include "tests/core/gradient_check.hpp"
#include "tests/core/layer_specs.hpp"
#include "tests/core/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace strata;
using Catch::Matchers::Contains;

namespace {

using strata::testing::TempDir;

using testing::layer;
LayerSpec dense(const std::string& name, int units) {
  LayerSpec s = layer(LayerKind::dense, name);
  s.units = units;
  return s;
}
LayerSpec conv(const std::string& name, int filters, int kernel) {
  LayerSpec s = layer(LayerKind::conv2d, name);
  s.filters = filters;
  s.kernel = kernel;
  return s;
}
LayerSpec maxpool(const std::string& name, int size) {
  LayerSpec s = layer(LayerKind::maxpool2d, name);
  s.size = size;
  s.stride = size;  // the YAML loader's default for pools; LayerSpec itself defaults to 1
  return s;
}

// conv2d 3@3x3 -> relu -> maxpool 2 -> flatten -> dense 5 -> tanh -> dense 3, on [1,8,8]:
// [3,6,6] -> [3,3,3] -> 27 -> 5 -> 3.
std::vector<LayerSpec> tiny_cnn() {
  return {conv("conv", 3, 3), layer(LayerKind::relu, "relu"),
          maxpool("pool", 2), layer(LayerKind::flatten, "flat"),
          dense("fc1", 5),    layer(LayerKind::tanh, "tanh"),
          dense("fc2", 3)};
}
const Shape cnn_input{1, 8, 8};

std::vector<std::vector<float>> snapshot(Model& model) {
  std::vector<std::vector<float>> out;
  for (auto& p : model.params())
    out.emplace_back(p.value->values().begin(), p.value->values().end());
  return out;
}

std::string config_error_of(const std::vector<LayerSpec>& specs, const Shape& input, int classes) {
  try {
    Model model(specs, input, classes, 1, "configs/model.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("no ConfigError thrown");
  return {};
}

std::string data_error_of(const std::string& path, Model& model) {
  try {
    load_weights(path, model);
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("no DataError thrown for " << path);
  return {};
}

}  // namespace

TEST_CASE("a small CNN's parameter gradients match central differences of the mean loss",
          "[model][gradcheck]") {
  Model model(tiny_cnn(), cnn_input, 3, 11);
  Rng rng(3);
  // The initial biases are all zero, a special point; random ones make it a generic one.
  for (auto& p : model.params())
    if (p.name.ends_with("/bias")) strata::testing::fill_normal(*p.value, rng, 0.5f);
  Tensor x({4, 1, 8, 8});
  strata::testing::fill_normal(x, rng);
  const std::vector<std::int32_t> labels{0, 2, 1, 2};

  Tensor grad_logits, scratch;
  softmax_cross_entropy(model.forward(x, true), labels, grad_logits);
  model.backward(x, grad_logits);
  std::vector<Tensor> analytic;
  for (auto& p : model.params()) analytic.push_back(*p.grad);
  REQUIRE(analytic.size() == 6);  // weight and bias of conv, fc1, fc2

  auto loss = [&] { return softmax_cross_entropy(model.forward(x, true), labels, scratch); };
  // Not 1e-2 as in the per-layer checks: here one conv weight feeds all 144 pre-activations of its
  // filter, and a 1e-2 step pushes several of them across a ReLU kink or swaps a max-pool winner,
  // which put conv/weight entries 7% off. At 1e-3 they agree to ~1e-4, and float rounding of the
  // loss (~1e-7) still costs only ~1e-4 in the quotient.
  const float eps = 1e-3f;
  int compared = 0, significant = 0;
  auto params = model.params();
  for (std::size_t k = 0; k < params.size(); ++k) {
    Tensor& value = *params[k].value;
    const std::int64_t stride = std::max<std::int64_t>(1, value.size() / 20);
    for (std::int64_t i = 0; i < value.size(); i += stride) {
      const float saved = value[i];
      value[i] = saved + eps;
      const double up = loss();
      value[i] = saved - eps;
      const double down = loss();
      value[i] = saved;
      const double numeric = (up - down) / (2.0 * static_cast<double>(eps));
      strata::testing::expect_close(analytic[k][i], numeric,
                                    params[k].name + "[" + std::to_string(i) + "]");
      ++compared;
      if (std::abs(numeric) > 0.03) ++significant;
    }
  }
  CHECK(compared > 60);
  // The absolute tolerance (3e-3) must not swallow the check: enough gradients are far above it.
  CHECK(significant > 15);
}

TEST_CASE("Model reports shape problems as ConfigError naming the file and the layer", "[model]") {
  SECTION("dense before flatten") {
    auto specs =
        std::vector<LayerSpec>{conv("c", 2, 3), layer(LayerKind::relu, "r"), dense("fc", 3)};
    specs[2].mark = {14, 7};
    const auto message = config_error_of(specs, cnn_input, 3);
    CHECK_THAT(message, Contains("configs/model.yaml:14:7: model.layers[2] (fc)"));
    CHECK_THAT(message, Contains("flatten"));
  }
  SECTION("last layer does not output num_classes logits") {
    auto specs = std::vector<LayerSpec>{layer(LayerKind::flatten, "flat"), dense("out", 4)};
    specs[1].mark = {20, 9};
    const auto message = config_error_of(specs, cnn_input, 3);
    CHECK_THAT(message, Contains("configs/model.yaml:20:9: model.layers[1] (out)"));
    CHECK_THAT(message, Contains("3 logits"));
    CHECK_THAT(message, Contains("[4]"));
  }
  SECTION("last layer is not flat") {
    const auto message = config_error_of({conv("c", 3, 8)}, cnn_input, 3);  // outputs [3,1,1]
    CHECK_THAT(message, Contains("model.layers[0] (c)"));
    CHECK_THAT(message, Contains("[3,1,1]"));
  }
  SECTION("conv kernel bigger than the input") {
    auto specs = tiny_cnn();
    specs[0].kernel = 9;
    const auto message = config_error_of(specs, cnn_input, 3);
    CHECK_THAT(message, Contains("configs/model.yaml"));
    CHECK_THAT(message, Contains("model.layers[0] (conv)"));
    CHECK_THAT(message, Contains("kernel 9"));
  }
  SECTION("pool window bigger than its input, deeper in the model") {
    auto specs = tiny_cnn();
    specs[2].size = 7;  // the conv output is 6x6
    const auto message = config_error_of(specs, cnn_input, 3);
    CHECK_THAT(message, Contains("model.layers[2] (pool)"));
  }
}

TEST_CASE("the init seed alone decides the initial parameters", "[model]") {
  Model a(tiny_cnn(), cnn_input, 3, 5), b(tiny_cnn(), cnn_input, 3, 5),
      c(tiny_cnn(), cnn_input, 3, 6);
  const auto wa = snapshot(a), wb = snapshot(b), wc = snapshot(c);
  CHECK(wa == wb);
  auto params = a.params();
  for (std::size_t k = 0; k < params.size(); ++k) {
    INFO(params[k].name);
    if (params[k].name.ends_with("/weight"))
      CHECK(wa[k] != wc[k]);
    else
      CHECK(wa[k] == wc[k]);  // biases start at zero whatever the seed
  }
}

TEST_CASE("weights round-trip through save_weights and load_weights", "[model][weights]") {
  TempDir dir;
  const auto path = dir.file("weights.h5");
  Model source(tiny_cnn(), cnn_input, 3, 21), target(tiny_cnn(), cnn_input, 3, 22);
  Rng rng(1);
  // Non-zero biases, so that a loader that skipped biases would be caught.
  for (auto& p : source.params())
    if (p.name.ends_with("/bias")) strata::testing::fill_normal(*p.value, rng);
  save_weights(path, source);

  const auto before = snapshot(target), expected = snapshot(source);
  REQUIRE(before.size() == expected.size());
  for (std::size_t k = 0; k < before.size(); ++k) REQUIRE(before[k] != expected[k]);

  load_weights(path, target);
  CHECK(snapshot(target) == expected);

  const auto file = h5::File::open_read(path);
  CHECK(file.read_attr_string("/", "format") == "strata-weights");
  CHECK(file.read_attr_int("/", "format_version") == 1);
  CHECK(file.shape("/weights/conv/weight") == Shape{3, 1, 3, 3});
  CHECK(file.shape("/weights/fc1/weight") == Shape{5, 27});
  CHECK(file.shape("/weights/fc2/bias") == Shape{3});
}

TEST_CASE("load_weights rejects files that do not fit the model with DataError",
          "[model][weights]") {
  TempDir dir;
  Model model(tiny_cnn(), cnn_input, 3, 1);
  // Writes every parameter of `model` except `skip`, with `reshape` applied to `reshaped`.
  auto write = [&](const std::string& name, const std::string& skip, const std::string& reshaped,
                   const Shape& reshape) {
    const auto path = dir.file(name);
    auto file = h5::File::create(path);
    for (auto& p : model.params()) {
      if (p.name == skip) continue;
      file.write_f32("/weights/" + p.name, p.name == reshaped ? reshape : p.value->shape(),
                     p.value->data());
    }
    file.flush();
    return path;
  };

  SECTION("a dataset is missing") {
    const auto path = write("missing.h5", "fc2/bias", "", {});
    const auto message = data_error_of(path, model);
    CHECK_THAT(message, Contains(path));
    CHECK_THAT(message, Contains("/weights/fc2/bias"));
  }
  SECTION("a dataset has the wrong shape but the right element count") {
    const auto path = write("shape.h5", "", "conv/weight", {1, 3, 3, 3});
    const auto message = data_error_of(path, model);
    CHECK_THAT(message, Contains(path));
    CHECK_THAT(message, Contains("/weights/conv/weight"));
    CHECK_THAT(message, Contains("[1,3,3,3]"));
    CHECK_THAT(message, Contains("[3,1,3,3]"));
  }
  SECTION("the file does not exist") {
    const auto path = dir.file("absent.h5");
    CHECK_THAT(data_error_of(path, model), Contains(path));
  }
}

TEST_CASE("a weights file written by h5py loads and gives the hand-computed forward pass",
          "[model][weights]") {
  TempDir dir;
  const auto path = dir.file("h5py_weights.h5");
  const auto script = dir.file("write.py");
  // float64 and float32 datasets both, so HDF5's type conversion is exercised; an extra dataset and
  // attribute that the model does not use must be ignored.
  std::ofstream(script) << R"(import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["weights/fc1/weight"] = np.array([[1, 0, -1], [0.5, 0.5, 0.5], [-1, 2, 0], [0, 0, 1]], dtype=np.float64)
    f["weights/fc1/bias"] = np.array([0.1, -0.2, 0.3, -0.4], dtype=np.float32)
    f["weights/fc2/weight"] = np.array([[1, -1, 0.5, 2], [0, 1, 1, -1]], dtype=np.float32)
    f["weights/fc2/bias"] = np.array([0.25, -0.5], dtype=np.float64)
    f["weights/unused/weight"] = np.zeros((7, 7), dtype=np.float32)
    f.attrs["written_by"] = "h5py"
)";
  // The system interpreter, not whatever python3 is first on PATH: it is the one with h5py.
  const std::string python = "/usr/bin/python3";
  if (std::system((python + " -c 'import h5py' 2>/dev/null").c_str()) != 0) {
    WARN(python << " cannot import h5py; skipping the h5py interoperability check");
    return;
  }
  REQUIRE(std::system((python + " " + script + " " + path).c_str()) == 0);

  Model model({layer(LayerKind::flatten, "flat"), dense("fc1", 4), layer(LayerKind::relu, "relu"),
               dense("fc2", 2)},
              {1, 1, 3}, 2, 99);
  load_weights(path, model);
  const Tensor x({1, 1, 1, 3}, {2.0f, -1.0f, 0.5f});
  const Tensor& y = model.forward(x, false);
  // fc1: [2-0.5+0.1, 0.5*1.5-0.2, -2-2+0.3, 0.5-0.4] = [1.6, 0.55, -3.7, 0.1]; relu -> [1.6, 0.55,
  // 0, 0.1] fc2: [1.6-0.55+0+0.2+0.25, 0.55+0-0.1-0.5] = [1.5, -0.05]
  REQUIRE(y.shape() == Shape{1, 2});
  CHECK(y[0] == Approx(1.5).epsilon(1e-6));
  CHECK(y[1] == Approx(-0.05).epsilon(1e-5));
}

TEST_CASE("pretrained weights fill the trunk and leave a new head as initialised",
          "[model][weights][transfer]") {
  TempDir dir;
  const auto path = dir.file("pretrained.h5");
  Model source(tiny_cnn(), cnn_input, 3, 31);
  const Normalisation recorded{0.25f, 0.5f};
  save_weights(path, source, &recorded);
  // The same trunk with a 4-class head: a head swap for a new label set.
  auto specs = tiny_cnn();
  specs.back().units = 4;
  Model target(specs, cnn_input, 4, 32);
  const auto initial_head = *target.params().back().value;
  const PretrainedWeights weights = read_pretrained(path);
  REQUIRE(weights.normalisation.has_value());
  CHECK(weights.normalisation->mean == 0.25f);
  CHECK(weights.normalisation->stddev == 0.5f);
  const auto before = snapshot(target);
  load_pretrained(weights, target, {"fc2"});
  const auto src = snapshot(source), got = snapshot(target);
  const auto params = target.params();
  for (std::size_t k = 0; k < params.size(); ++k) {
    INFO(params[k].name);
    if (params[k].name.starts_with("fc2/"))
      CHECK(got[k] == before[k]);  // the fresh head keeps its initialisation
    else
      CHECK(got[k] == src[k]);  // the trunk is the pretrained one, to the bit
  }
  CHECK(target.params().back().value->values()[0] == initial_head.values()[0]);
  // Without listing the head, its other shape is named, with the tensor's file and model shapes.
  Model again(specs, cnn_input, 4, 33);
  CHECK_THROWS_WITH(load_pretrained(weights, again, {}),
                    Contains("other shape: fc2/weight (file [3,5], model [4,5]), fc2/bias (file "
                             "[3], model [4])"));
  // A model with another layer name: the missing and the extra tensors are named.
  specs[4].name = "hidden";
  Model renamed(specs, cnn_input, 4, 34);
  CHECK_THROWS_WITH(load_pretrained(weights, renamed, {"fc2"}),
                    Contains("missing from the file: hidden/weight, hidden/bias") &&
                        Contains("in the file but not in the model: fc1/bias, fc1/weight"));
}
