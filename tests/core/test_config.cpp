// Tests for the YAML config loader (core/config.cpp): field values, defaults, and the exact
// file:line:column, key path and wording of every kind of configuration error.
#include <cctype>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/config.hpp"
#include "core/config_names.hpp"
#include "core/errors.hpp"

using strata::Config;
using strata::ConfigError;
using strata::parse_config;

namespace {

// `data` is a required section; snippets about other sections get a minimal one appended,
// after their own lines, so that the line numbers they test do not move.
std::string with_data(const std::string& yaml) {
  const bool is_map_of_sections = !yaml.empty() &&
                                  std::isalpha(static_cast<unsigned char>(yaml[0])) != 0 &&
                                  yaml.back() == '\n';
  if (!is_map_of_sections || yaml.rfind("data:", 0) == 0 ||
      yaml.find("\ndata:") != std::string::npos)
    return yaml;
  return yaml + "data: {source: synthetic}\n";
}

// The what() of the ConfigError that parsing `yaml` throws; fails the test if none is thrown.
// Other exception types propagate and fail the test too: every config problem must be a
// ConfigError so that it maps to the usage exit code.
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(with_data(yaml), "t.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("no ConfigError thrown for:\n" << yaml);
  return {};
}

std::string load_error_of(const std::string& path) {
  try {
    strata::load_config(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("no ConfigError thrown for " << path);
  return {};
}

const std::string data_dir = std::string(STRATA_TEST_DATA_DIR) + "/config";

}  // namespace

TEST_CASE("a full config parses with every field taken from the YAML", "[config]") {
  const std::string yaml = R"(run:
  name: quickstart
  seed: 18446744073709551615
  threads: 2
data:
  source: hdf5
  path: ../data/fashion_mnist.h5
  validation_fraction: 0.2
  train_subset: 1000
  test_subset: 200
  synthetic: {train: 100, test: 50, classes: 3, channels: 2, height: 8, width: 9}
model:
  layers:
    - conv2d: {filters: 32, kernel: 5, stride: 2, padding: 1, init: glorot, name: conv1}
    - relu
    - maxpool2d: {size: 3, stride: 1}
    - avgpool2d: {size: 2}
    - dropout: {rate: 0.25}
    - leaky_relu: {alpha: 0.2}
    - tanh
    - sigmoid
    - flatten
    - dense: {units: 10, init: zeros}
training:
  epochs: 5
  local_batch: 32
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.0005}
  schedule: {type: step, warmup_epochs: 1.5, step_epochs: 2, gamma: 0.5}
output:
  dir: runs/quickstart
  progress_seconds: 2.5
stages: [train, {train: {}}]
)";
  const Config c = parse_config(yaml, "configs/full.yaml");

  CHECK(c.file == "configs/full.yaml");
  CHECK(c.run.name == "quickstart");
  CHECK(c.run.seed == 18446744073709551615ULL);
  CHECK(c.run.threads == 2);

  CHECK(c.data.source == strata::DataSource::hdf5);
  CHECK(c.data.path == "data/fashion_mnist.h5");  // read from the config file's directory, configs/
  CHECK(c.data.validation_fraction == 0.2);
  CHECK(c.data.train_subset == 1000);
  CHECK(c.data.test_subset == 200);
  CHECK(c.data.synthetic.train == 100);
  CHECK(c.data.synthetic.test == 50);
  CHECK(c.data.synthetic.classes == 3);
  CHECK(c.data.synthetic.channels == 2);
  CHECK(c.data.synthetic.height == 8);
  CHECK(c.data.synthetic.width == 9);

  REQUIRE(c.layers.size() == 10);
  using strata::LayerKind;
  const auto& conv = c.layers[0];
  CHECK(conv.kind == LayerKind::conv2d);
  CHECK(conv.name == "conv1");
  CHECK(conv.filters == 32);
  CHECK(conv.kernel == 5);
  CHECK(conv.stride == 2);
  CHECK(conv.padding == 1);
  CHECK(conv.init == strata::InitKind::glorot);
  CHECK(conv.mark.line == 14);
  CHECK(conv.mark.column == 7);

  CHECK(c.layers[1].kind == LayerKind::relu);
  CHECK(c.layers[1].name == "relu_1");
  CHECK(c.layers[1].mark.line == 15);
  CHECK(c.layers[1].mark.column == 7);

  CHECK(c.layers[2].kind == LayerKind::maxpool2d);
  CHECK(c.layers[2].name == "maxpool2d_2");
  CHECK(c.layers[2].size == 3);
  CHECK(c.layers[2].stride == 1);

  CHECK(c.layers[3].kind == LayerKind::avgpool2d);
  CHECK(c.layers[3].name == "avgpool2d_3");
  CHECK(c.layers[3].size == 2);
  CHECK(c.layers[3].stride == 2);  // defaults to the window size

  CHECK(c.layers[4].kind == LayerKind::dropout);
  CHECK(c.layers[4].rate == 0.25f);
  CHECK(c.layers[5].kind == LayerKind::leaky_relu);
  CHECK(c.layers[5].alpha == 0.2f);
  CHECK(c.layers[6].kind == LayerKind::tanh);
  CHECK(c.layers[7].kind == LayerKind::sigmoid);
  CHECK(c.layers[8].kind == LayerKind::flatten);
  CHECK(c.layers[8].name == "flatten_8");

  const auto& dense = c.layers[9];
  CHECK(dense.kind == LayerKind::dense);
  CHECK(dense.name == "dense_9");
  CHECK(dense.units == 10);
  CHECK(dense.init == strata::InitKind::zeros);
  CHECK(dense.mark.line == 23);
  CHECK(dense.mark.column == 7);

  CHECK(c.training.epochs == 5);
  CHECK(c.training.local_batch == 32);
  const auto& opt = c.training.optimizer;
  CHECK(opt.kind == strata::OptimizerKind::sgd);
  CHECK(opt.lr == 0.05);
  CHECK(opt.momentum == 0.9);
  CHECK(opt.nesterov);
  CHECK(opt.weight_decay == 0.0005);
  const auto& sched = c.training.schedule;
  CHECK(sched.kind == strata::ScheduleKind::step);
  CHECK(sched.warmup_epochs == 1.5);
  CHECK(sched.step_epochs == 2.0);
  CHECK(sched.gamma == 0.5);

  CHECK(c.output.dir == "runs/quickstart");
  CHECK(c.output.progress_seconds == 2.5);

  REQUIRE(c.stages.size() == 2);
  CHECK(c.stages[0].kind() == strata::StageKind::train);
  CHECK(c.stages[0].mark.line == 32);
  CHECK(c.stages[0].mark.column == 10);
  CHECK(c.stages[1].kind() == strata::StageKind::train);
  CHECK(c.stages[1].mark.line == 32);
  CHECK(c.stages[1].mark.column == 17);
}

TEST_CASE("adam and cosine settings parse", "[config]") {
  const Config c = parse_config(with_data(R"(training:
  optimizer: {type: adam, lr: 0.001, beta1: 0.8, beta2: 0.99, eps: 1.0e-7, weight_decay: 0}
  schedule: {type: cosine, warmup_epochs: 0, min_lr: 1e-5}
data: {source: synthetic}
model: {layers: [flatten, {dense: {units: 3}}]}
)"),
                                "t.yaml");
  const auto& opt = c.training.optimizer;
  CHECK(opt.kind == strata::OptimizerKind::adam);
  CHECK(opt.lr == 0.001);
  CHECK(opt.beta1 == 0.8);
  CHECK(opt.beta2 == 0.99);
  CHECK(opt.eps == 1.0e-7);
  CHECK(opt.weight_decay == 0.0);  // an integer is accepted where a number is expected
  CHECK(c.training.schedule.kind == strata::ScheduleKind::cosine);
  CHECK(c.training.schedule.min_lr == 1e-5);
  CHECK(c.data.source == strata::DataSource::synthetic);
  CHECK(c.data.path.empty());  // not needed for synthetic data
  REQUIRE(c.layers.size() == 2);
  CHECK(c.layers[1].units == 3);
}

TEST_CASE("absent sections keep their defaults", "[config]") {
  const Config c = parse_config(with_data("model:\n  layers: [relu]\n"), "t.yaml");
  const Config defaults;

  CHECK(c.run.name == defaults.run.name);
  CHECK(c.run.seed == defaults.run.seed);
  CHECK(c.run.threads == defaults.run.threads);
  CHECK(c.data.source == strata::DataSource::synthetic);  // the one key given in the data section
  CHECK(c.data.path == defaults.data.path);
  CHECK(c.data.validation_fraction == defaults.data.validation_fraction);
  CHECK(c.data.synthetic.train == defaults.data.synthetic.train);
  CHECK(c.training.epochs == defaults.training.epochs);
  CHECK(c.training.local_batch == defaults.training.local_batch);
  CHECK(c.training.optimizer.kind == strata::OptimizerKind::sgd);
  CHECK(c.training.optimizer.lr == defaults.training.optimizer.lr);
  CHECK(c.training.schedule.kind == strata::ScheduleKind::constant);
  CHECK(c.output.dir == defaults.output.dir);
  CHECK(c.output.progress_seconds == defaults.output.progress_seconds);

  REQUIRE(c.stages.size() == 1);  // one train stage when none are listed
  CHECK(c.stages[0].kind() == strata::StageKind::train);
  CHECK(c.stages[0].mark.line == 0);

  REQUIRE(c.layers.size() == 1);
  CHECK(c.layers[0].name == "relu_0");
}

TEST_CASE("empty sections and empty layer parameter maps mean defaults", "[config]") {
  const Config c = parse_config(with_data(R"(run:
training: {}
model:
  layers:
    - relu:
    - flatten: {}
    - maxpool2d
)"),
                                "t.yaml");
  CHECK(c.run.name == Config{}.run.name);
  CHECK(c.training.epochs == Config{}.training.epochs);
  REQUIRE(c.layers.size() == 3);
  CHECK(c.layers[0].kind == strata::LayerKind::relu);
  CHECK(c.layers[1].kind == strata::LayerKind::flatten);
  CHECK(c.layers[2].size == 2);
  CHECK(c.layers[2].stride == 2);
}

TEST_CASE("to_string names layer and init kinds as the YAML spells them", "[config]") {
  CHECK(std::string(strata::to_string(strata::LayerKind::leaky_relu)) == "leaky_relu");
  CHECK(std::string(strata::to_string(strata::LayerKind::conv2d)) == "conv2d");
  CHECK(std::string(strata::to_string(strata::InitKind::glorot)) == "glorot");
  CHECK(std::string(strata::to_string(strata::InitKind::zeros)) == "zeros");
  // One table serves reading and writing: every name to_string writes reads back as its value.
  const auto round_trips = [](const auto& choices) {
    for (const auto& c : choices) {
      const std::string yaml = std::string(strata::to_string(c.value));
      if (yaml != c.name) return false;
    }
    return true;
  };
  CHECK(round_trips(strata::EnumNames<strata::OptimizerKind>::choices));
  CHECK(round_trips(strata::EnumNames<strata::RankLayout>::choices));
  CHECK(round_trips(strata::EnumNames<strata::ParamKind>::choices));
  CHECK(std::string(strata::to_string(strata::ParamKind::integer)) == "int");
  CHECK(std::string(strata::to_string(strata::StageKind::ensemble)) == "ensemble");
}

TEST_CASE("malformed YAML, an empty file and a non-map top level are errors", "[config][errors]") {
  CHECK(error_of("model: {layers: [relu]}\nrun: a: b\n") ==
        "t.yaml:2:7: malformed YAML: illegal map value");
  CHECK(error_of("") ==
        "t.yaml:1:1: the config is empty; expected a map with at least 'data' and 'model.layers'");
  CHECK_THAT(error_of("# nothing but a comment\n"),
             Catch::StartsWith("t.yaml:1:1: the config is empty"));
  CHECK(error_of("- relu\n") ==
        "t.yaml:1:1: expected a map of sections at the top level, got a list");
}

TEST_CASE("wrong value types name the key and what was expected", "[config][errors]") {
  const std::string model = "model: {layers: [relu]}\n";
  CHECK(error_of(model + "run:\n  threads: abc\n") ==
        "t.yaml:3:12: run.threads: expected an integer, got 'abc'");
  CHECK(error_of(model + "run:\n  threads: 1.5\n") ==
        "t.yaml:3:12: run.threads: expected an integer, got '1.5'");
  CHECK(error_of(model + "run:\n  threads: [1]\n") ==
        "t.yaml:3:12: run.threads: expected an integer, got a list");
  CHECK(error_of(model + "run:\n  threads:\n") ==
        "t.yaml:3:3: run.threads: expected an integer, got nothing");
  CHECK(error_of(model + "training:\n  epochs: \"5\"\n") ==
        "t.yaml:3:11: training.epochs: expected an integer, got '5' (quoted, so a string)");
  CHECK(error_of(model + "output:\n  progress_seconds: soon\n") ==
        "t.yaml:3:21: output.progress_seconds: expected a number, got 'soon'");
  CHECK(error_of(model + "training:\n  optimizer: {nesterov: yes}\n") ==
        "t.yaml:3:25: training.optimizer.nesterov: expected true or false, got 'yes'");
  CHECK(error_of(model + "run:\n  name: {a: 1}\n") ==
        "t.yaml:3:9: run.name: expected a string, got a map");
  CHECK(error_of(model + "run: 3\n") == "t.yaml:2:6: run: expected a map, got '3'");
  CHECK(error_of("model:\n  layers:\n    - dense: {units: 10, init: [he]}\n") ==
        "t.yaml:3:32: model.layers[0].dense.init: expected a string, got a list");
}

TEST_CASE("out-of-range values report the allowed range and the value as written",
          "[config][errors]") {
  const std::string model = "model: {layers: [relu]}\n";
  CHECK(error_of("data:\n  path: d.h5\n  validation_fraction: 0.7\n" + model) ==
        "t.yaml:3:24: data.validation_fraction: expected a number in [0, 0.5], got 0.7");
  CHECK(error_of("training:\n  optimizer:\n    type: sgd\n    lr: -1\n" + model) ==
        "t.yaml:4:9: training.optimizer.lr: expected a positive number, got -1");
  CHECK(error_of("training:\n  epochs: 0\n" + model) ==
        "t.yaml:2:11: training.epochs: expected a positive integer, got 0");
  CHECK(error_of("run:\n  seed: -1\n" + model) ==
        "t.yaml:2:9: run.seed: expected a non-negative integer, got -1");
  CHECK(error_of("run:\n  seed: 18446744073709551616\n" + model) ==
        "t.yaml:2:9: run.seed: expected an integer in [0, 18446744073709551615], got "
        "18446744073709551616");
  // Beyond int, the message gives the limit: "a positive integer" alone does not say 2^31 is too
  // large.
  CHECK(error_of("run:\n  threads: 99999999999\n" + model) ==
        "t.yaml:2:12: run.threads: expected a non-negative integer, got 99999999999, above the "
        "largest allowed, 2147483647");
  CHECK(error_of("training:\n  epochs: 1000000000000\n" + model) ==
        "t.yaml:2:11: training.epochs: expected a positive integer, got 1000000000000, above the "
        "largest allowed, 2147483647");
  CHECK(error_of("data:\n  source: synthetic\n  synthetic: {classes: 300}\n" + model) ==
        "t.yaml:3:24: data.synthetic.classes: expected an integer in [2, 256], got 300");
  CHECK(error_of("model:\n  layers:\n    - dropout: {rate: 1.0}\n") ==
        "t.yaml:3:23: model.layers[0].dropout.rate: expected a number in [0, 1), got 1.0");
  CHECK(error_of("training:\n  schedule: {type: step, gamma: 0}\n" + model) ==
        "t.yaml:2:33: training.schedule.gamma: expected a number in (0, 1], got 0");
}

TEST_CASE("unknown keys are errors at every level", "[config][errors]") {
  const std::string model = "model: {layers: [relu]}\n";
  SECTION("top level") {
    CHECK(error_of(model + "trainig: {epochs: 2}\n") ==
          "t.yaml:2:1: trainig: unknown key (known: run, data, model, training, parallel, output, "
          "checkpoint, "
          "stages)");
  }
  SECTION("in a section") {
    CHECK(error_of("run:\n  name: x\n  sede: 3\n" + model) ==
          "t.yaml:3:3: run.sede: unknown key (known: name, seed, threads, device, thread_split)");
  }
  SECTION("nested two levels down") {
    CHECK(error_of("data:\n  source: synthetic\n  synthetic: {train: 10, depth: 3}\n" + model) ==
          "t.yaml:3:26: data.synthetic.depth: unknown key (known: train, test, classes, channels, "
          "height, width)");
  }
  SECTION("in a layer's parameters") {
    CHECK(error_of("model:\n  layers:\n    - dense: {units: 10, filters: 3}\n") ==
          "t.yaml:3:26: model.layers[0].dense.filters: unknown key (known: units, init, split, "
          "name)");
    CHECK(error_of("model:\n  layers:\n    - relu\n    - relu: {alpha: 0.1}\n") ==
          "t.yaml:4:14: model.layers[1].relu.alpha: unknown key (known: name)");
  }
  SECTION("a setting of the other optimizer or schedule type") {
    CHECK(
        error_of("training:\n  optimizer: {type: sgd, beta1: 0.9}\n" + model) ==
        "t.yaml:2:26: training.optimizer.beta1: unknown key (known: type, lr, momentum, nesterov, "
        "weight_decay); 'beta1' belongs to optimizer type 'adam'");
    CHECK(error_of("training:\n  optimizer: {type: adam, momentum: 0.9}\n" + model) ==
          "t.yaml:2:27: training.optimizer.momentum: unknown key (known: type, lr, beta1, beta2, "
          "eps, "
          "weight_decay); 'momentum' belongs to optimizer type 'sgd'");
    CHECK(error_of("training:\n  schedule: {type: cosine, gamma: 0.5}\n" + model) ==
          "t.yaml:2:28: training.schedule.gamma: unknown key (known: type, warmup_epochs, min_lr); "
          "'gamma' belongs to schedule type 'step'");
  }
  SECTION("a repeated key") {
    CHECK(error_of("run:\n  seed: 1\n  seed: 2\n" + model) ==
          "t.yaml:3:3: run.seed: duplicate key");
  }
}

TEST_CASE("missing required keys are reported at the enclosing map", "[config][errors]") {
  CHECK(error_of("run: {seed: 1}\n") == "t.yaml:1:1: missing required key 'model'");
  CHECK(error_of("run: {seed: 1}\nmodel: {}\n") ==
        "t.yaml:2:8: model: missing required key 'layers'");
  CHECK(error_of("model:\n  layers:\n    - dense: {init: he}\n") ==
        "t.yaml:3:14: model.layers[0].dense: missing required key 'units'");
  CHECK(error_of("model:\n  layers:\n    - relu\n    - dense\n") ==
        "t.yaml:4:7: model.layers[1].dense: missing required key 'units'");
  CHECK(error_of("model:\n  layers:\n    - conv2d: {filters: 4}\n") ==
        "t.yaml:3:15: model.layers[0].conv2d: missing required key 'kernel'");
  CHECK(error_of("data: {source: hdf5}\nmodel: {layers: [relu]}\n") ==
        "t.yaml:1:7: data: missing required key 'path' (needed when source is hdf5)");
}

TEST_CASE("layer list problems", "[config][errors]") {
  SECTION("duplicate explicit names") {
    CHECK(error_of("model:\n  layers:\n    - dense: {units: 4, name: fc}\n    - relu\n"
                   "    - dense: {units: 2, name: fc}\n") ==
          "t.yaml:5:31: model.layers[2].dense.name: duplicate layer name 'fc' (also used by "
          "model.layers[0])");
  }
  SECTION("an explicit name that collides with a default one") {
    CHECK(error_of("model:\n  layers:\n    - relu: {name: dense_1}\n    - dense: {units: 2}\n") ==
          "t.yaml:4:7: model.layers[1]: duplicate layer name 'dense_1' (also used by "
          "model.layers[0])");
  }
  SECTION("unknown layer kind") {
    const std::string known =
        "(known: dense, conv2d, maxpool2d, avgpool2d, flatten, dropout, relu, tanh, sigmoid, "
        "leaky_relu)";
    CHECK(error_of("model:\n  layers:\n    - dens: {units: 2}\n") ==
          "t.yaml:3:7: model.layers[0]: unknown layer kind 'dens' " + known);
    CHECK(error_of("model:\n  layers:\n    - relu\n    - softmax\n") ==
          "t.yaml:4:7: model.layers[1]: unknown layer kind 'softmax' " + known);
  }
  SECTION("parameters indented at the kind's level") {
    CHECK(error_of("model:\n  layers:\n    - dense:\n      units: 3\n") ==
          "t.yaml:3:7: model.layers[0]: expected one layer kind per list item, got 2 keys (dense, "
          "units); put the parameters in a map under the kind");
  }
  SECTION("not a list, empty, or a bad item") {
    CHECK(error_of("model:\n  layers: relu\n") ==
          "t.yaml:2:11: model.layers: expected a non-empty list of layers, got 'relu'");
    CHECK(error_of("model:\n  layers: []\n") ==
          "t.yaml:2:11: model.layers: expected a non-empty list of layers, got a list");
    CHECK(error_of("model:\n  layers:\n    - [relu]\n") ==
          "t.yaml:3:7: model.layers[0]: expected a layer kind or 'kind: {params}', got a list");
    CHECK(error_of("model:\n  layers:\n    - dense: 10\n") ==
          "t.yaml:3:14: model.layers[0].dense: expected a map, got '10'");
  }
}

TEST_CASE("unknown choices list the known ones", "[config][errors]") {
  const std::string model = "model: {layers: [relu]}\n";
  CHECK(
      error_of("training:\n  optimizer: {type: rmsprop, lr: 0.1}\n" + model) ==
      "t.yaml:2:21: training.optimizer.type: unknown optimizer type 'rmsprop' (known: sgd, adam)");
  CHECK(error_of("training:\n  schedule: {type: linear}\n" + model) ==
        "t.yaml:2:20: training.schedule.type: unknown schedule type 'linear' (known: constant, "
        "step, cosine)");
  CHECK(error_of("data: {source: csv}\n" + model) ==
        "t.yaml:1:16: data.source: unknown data source 'csv' (known: hdf5, synthetic)");
  CHECK(error_of("model:\n  layers:\n    - dense: {units: 2, init: xavier}\n") ==
        "t.yaml:3:31: model.layers[0].dense.init: unknown init 'xavier' (known: he, glorot, zeros, "
        "uniform_fan_in)");
}

TEST_CASE("stages must be a list of known stage names", "[config][errors]") {
  const std::string model = "model: {layers: [relu]}\n";
  CHECK(error_of(model + "stages: train\n") ==
        "t.yaml:2:9: stages: expected a non-empty list of stages, got 'train'");
  CHECK(error_of(model + "stages: {train: {}}\n") ==
        "t.yaml:2:9: stages: expected a non-empty list of stages, got a map");
  CHECK(error_of(model + "stages: [train, eval]\n") ==
        "t.yaml:2:17: stages[1]: unknown stage 'eval' (known: train, hpo, ensemble, transfer)");
  CHECK(error_of(model + "stages:\n  - train: {epochs: 3}\n") ==
        "t.yaml:3:13: stages[0].train.epochs: unknown key (known: parallel)");
  CHECK(error_of(model + "stages: [[train]]\n") ==
        "t.yaml:2:10: stages[0]: expected a stage name or 'stage: {params}', got a list");
}

TEST_CASE("load_config reads a file and names it in errors", "[config][file]") {
  SECTION("a good file") {
    const std::string path = data_dir + "/good.yaml";
    const Config c = strata::load_config(path);
    CHECK(c.file == path);
    CHECK(c.run.name == "quickstart");
    CHECK(c.data.source == strata::DataSource::synthetic);
    CHECK(c.data.synthetic.train == 256);
    REQUIRE(c.layers.size() == 5);
    CHECK(c.layers[0].name == "conv1");
    CHECK(c.layers[0].mark.line == 12);
    CHECK(c.layers[2].stride == 2);
    CHECK(c.training.optimizer.kind == strata::OptimizerKind::adam);
    CHECK(c.training.schedule.min_lr == 0.0001);
  }
  SECTION("an unknown key") {
    const std::string path = data_dir + "/bad_unknown_key.yaml";
    CHECK(load_error_of(path) ==
          path + ":3:3: run.sede: unknown key (known: name, seed, threads, device, thread_split)");
  }
  SECTION("malformed YAML") {
    const std::string path = data_dir + "/bad_malformed.yaml";
    CHECK(load_error_of(path) == path + ":4:9: malformed YAML: end of sequence flow not found");
  }
  SECTION("a missing file") {
    CHECK(load_error_of("/nonexistent/strata/x.yaml") ==
          "/nonexistent/strata/x.yaml: cannot read config file (No such file or directory)");
  }
  SECTION("a directory") {
    CHECK(load_error_of(data_dir) == data_dir + ": cannot read config file (Is a directory)");
  }
}

TEST_CASE("the parallel section parses and is checked", "[config]") {
  const Config c = parse_config(with_data(R"(model: {layers: [flatten, {dense: {units: 3}}]}
parallel:
  max_global_batch: 256
  model: 2
  data: 4
  memory_per_rank_mib: 512
  bucket_mib: 0
  lr_scaling: none
  watchdog_s: 30
)"),
                                "t.yaml");
  const auto& p = c.parallel;
  CHECK(p.max_global_batch == 256);
  CHECK(p.model == 2);
  CHECK(p.data == 4);
  CHECK(p.memory_per_rank_mib == 512.0);
  CHECK(p.bucket_mib == 0.0);
  CHECK(p.lr_scaling == strata::LrScaling::none);
  CHECK(p.watchdog_s == 30.0);
  CHECK(p.mark.line == 3);  // the section's first key, where planner errors point
  const Config defaults =
      parse_config(with_data("model: {layers: [flatten, {dense: {units: 3}}]}\n"), "t.yaml");
  CHECK(defaults.parallel.lr_scaling == strata::LrScaling::linear);
  CHECK(defaults.parallel.bucket_mib == 25.0);
  CHECK(defaults.parallel.watchdog_s == 300.0);

  const std::string model = "model: {layers: [flatten, {dense: {units: 3}}]}\n";
  CHECK_THAT(error_of(model + "parallel: {shards: 2}\n"),
             Catch::Contains("t.yaml:2:12: parallel.shards: unknown key"));
  CHECK_THAT(
      error_of(model + "parallel: {lr_scaling: sqrt}\n"),
      Catch::Contains("parallel.lr_scaling: unknown lr_scaling 'sqrt' (known: linear, none)"));
  CHECK(parse_config(with_data(model + "parallel: {accumulate: auto}\n"), "t.yaml")
            .parallel.accumulate == 0);
  CHECK(parse_config(with_data(model + "parallel: {accumulate: 3}\n"), "t.yaml")
            .parallel.accumulate == 3);
  CHECK(defaults.parallel.accumulate == 1);
  CHECK_THAT(error_of(model + "parallel: {accumulate: 0}\n"),
             Catch::Contains("parallel.accumulate: expected a positive integer, got 0"));
  CHECK_THAT(error_of(model + "parallel: {data: -1}\n"),
             Catch::Contains("parallel.data: expected a non-negative integer, got -1"));
  CHECK(parse_config(with_data(model + "parallel: {watchdog_s: 0}\n"), "t.yaml")
            .parallel.watchdog_s == 0.0);  // off
  CHECK_THAT(error_of(model + "parallel: {watchdog_s: -1}\n"),
             Catch::Contains("parallel.watchdog_s: expected"));
  CHECK_THAT(error_of(model + "parallel: {watchdog_s: soon}\n"),
             Catch::Contains("parallel.watchdog_s: expected"));
}

TEST_CASE("data.read chooses memory or shards", "[config]") {
  const std::string model = "model: {layers: [flatten, {dense: {units: 3}}]}\n";
  CHECK(parse_config(model + "data: {path: d.h5, read: shards}\n", "t.yaml").data.read ==
        strata::DataRead::shards);
  CHECK(parse_config(model + "data: {path: d.h5}\n", "t.yaml").data.read ==
        strata::DataRead::memory);
  CHECK_THAT(
      error_of(model + "data: {source: synthetic, read: shards}\n"),
      Catch::Contains(
          "t.yaml:2:33: data.read: shards reads an HDF5 file; synthetic data lives in memory"));
}

TEST_CASE("layer splits parse and a row split must follow a column split", "[config]") {
  const Config c = parse_config(with_data(R"(model:
  layers:
    - conv2d: {filters: 16, kernel: 3, split: column}
    - flatten
    - dense: {units: 8, split: column}
    - relu
    - dropout: {rate: 0.1}
    - dense: {units: 4, split: row}
)"),
                                "t.yaml");
  CHECK(c.layers[0].split == strata::SplitKind::column);
  CHECK(c.layers[1].split == strata::SplitKind::none);
  CHECK(c.layers[2].split == strata::SplitKind::column);
  CHECK(c.layers[5].split == strata::SplitKind::row);
  CHECK(error_of("model:\n  layers:\n    - flatten\n    - dense: {units: 4, split: row}\n") ==
        "t.yaml:4:7: model.layers[1]: split: row needs a dense layer with split: column before it, "
        "with only "
        "activations or dropout between");
  CHECK_THAT(
      error_of("model:\n  layers:\n    - conv2d: {filters: 4, kernel: 3, split: row}\n"),
      Catch::Contains("model.layers[0].conv2d.split: unknown split 'row' (known: none, column)"));
}

TEST_CASE("the ensemble stage parses its members and combiners", "[config]") {
  const Config c = parse_config(with_data(R"(model: {layers: [flatten, {dense: {units: 10}}]}
parallel: {max_global_batch: 128, bucket_mib: 4}
stages:
  - ensemble:
      feature_subsets: [{rows: [0, 14]}, {rows: [14, 28], cols: [4, 24], channels: [0]}]
      combiners: [vote, mean]
      epochs: 3
      parallel: {model: 2}
)"),
                                "e.yaml");
  REQUIRE(c.stages.size() == 1);
  CHECK(c.stages[0].kind() == strata::StageKind::ensemble);
  const auto& e = std::get<strata::EnsembleSpec>(c.stages[0].settings);
  CHECK_FALSE(e.from.has_value());
  REQUIRE(e.feature_subsets.size() == 2);
  CHECK(e.feature_subsets[0].row_begin == 0);
  CHECK(e.feature_subsets[0].row_end == 14);
  CHECK(e.feature_subsets[0].col_end == 0);  // to the edge
  CHECK(e.feature_subsets[1].col_begin == 4);
  CHECK(e.feature_subsets[1].channels == std::vector<int>{0});
  CHECK(e.feature_subsets[1].mark.line == 5);
  CHECK(e.combiners ==
        std::vector<strata::CombinerKind>{strata::CombinerKind::vote, strata::CombinerKind::mean});
  CHECK(e.epochs == 3);
  // The stage's parallel block over the run's: model from the stage, the rest from the run.
  REQUIRE(c.stages[0].parallel.has_value());
  CHECK(c.stages[0].parallel->model == 2);
  CHECK(c.stages[0].parallel->max_global_batch == 128);
  CHECK(c.stages[0].parallel->bucket_mib == 4.0);
  CHECK(c.stages[0].parallel->mark.line == 8);
  CHECK(c.parallel.model == 0);
  CHECK(strata::stage_config(c, c.stages[0]).parallel.model == 2);
}

TEST_CASE("ensemble settings are checked", "[config][errors]") {
  const std::string model = "model: {layers: [relu]}\nstages:\n  - ensemble:\n";
  CHECK(error_of(model + "      seeds: 3\n      bagging: 2\n") ==
        "t.yaml:5:16: stages[0].ensemble.bagging: choose one of seeds, bagging and "
        "feature_subsets, not seeds and bagging");
  CHECK(error_of(model + "      epochs: 2\n") ==
        "t.yaml:4:7: stages[0].ensemble: an ensemble needs members: 'from: hpo.top_k' (an earlier "
        "search's best configs), 'seeds: n', 'bagging: n' or 'feature_subsets: [...]'");
  CHECK(error_of(model + "      seeds: 2\n      combiners: [mean, mean]\n") ==
        "t.yaml:5:25: stages[0].ensemble.combiners[1]: 'mean' is listed twice");
  CHECK(
      error_of(model + "      feature_subsets: [{rows: [5, 5]}]\n") ==
      "t.yaml:4:32: stages[0].ensemble.feature_subsets[0].rows: expected begin < end, got [5, 5]");
  CHECK(error_of(model + "      seeds: 2\n      parallel: {model: -1}\n") ==
        "t.yaml:5:25: stages[0].ensemble.parallel.model: expected a non-negative integer, "
        "got -1");
  CHECK(error_of("model: {layers: [relu]}\nstages: [ensemble]\n") ==
        "t.yaml:2:10: stages[0]: the ensemble stage needs its settings: '- ensemble: {...}'");
}

TEST_CASE("${VAR} and ${VAR:-default} expand from the environment", "[config][env]") {
  ::setenv("STRATA_TEST_RUN", "job_17", 1);
  ::setenv("STRATA_TEST_EMPTY", "", 1);
  ::unsetenv("STRATA_TEST_UNSET");
  // In a flow map ({...}) a value with ${...} must be quoted; in block style it need not be.
  const Config c = parse_config(with_data(R"(run:
  name: "${STRATA_TEST_RUN}"
  seed: ${STRATA_TEST_UNSET:-7}
model: {layers: [relu]}
output: {dir: "runs/${STRATA_TEST_RUN}/x${STRATA_TEST_EMPTY:-e}"}
)"),
                                "env.yaml");
  CHECK(c.run.name == "job_17");
  CHECK(c.run.seed == 7);  // typed after expansion, as if written so
  CHECK(c.output.dir == "runs/job_17/xe");
  CHECK(c.resolved_text.find("runs/job_17/xe") != std::string::npos);
  CHECK(error_of("model: {layers: [relu]}\noutput: {dir: \"a/${STRATA_TEST_UNSET}\"}\n") ==
        "t.yaml:2:15: environment variable STRATA_TEST_UNSET is not set (write "
        "${STRATA_TEST_UNSET:-value} for a default)");
  CHECK(error_of("model: {layers: [relu]}\noutput: {dir: \"a/${STRATA_TEST_RUN\"}\n") ==
        "t.yaml:2:15: 'a/${STRATA_TEST_RUN': '${' without its closing '}'");
  CHECK(error_of("model: {layers: [relu]}\noutput: {dir: \"${1X}\"}\n") ==
        "t.yaml:2:15: '${1X}': expected ${NAME} or ${NAME:-default} with NAME a variable name");
}

TEST_CASE("overrides (--set) are typed and checked like the file, and name themselves in errors",
          "[config][overrides]") {
  const std::string yaml =
      with_data(R"(model: {layers: [flatten, {dense: {units: 8}}, {dense: {units: 10}}]}
training: {epochs: 2}
)");
  const Config c = parse_config(yaml, "o.yaml",
                                {"training.epochs=5", "model.layers[1].dense.units=64",
                                 "training.optimizer.lr=0.25", "output.dir=runs/o"});
  CHECK(c.training.epochs == 5);
  CHECK(c.layers[1].units == 64);
  CHECK(c.training.optimizer.lr == 0.25);  // a section the file does not have
  CHECK(c.output.dir == "runs/o");
  CHECK(c.overrides.size() == 4);
  const auto error = [&](const std::string& override_text) {
    return error_of(yaml, {override_text});
  };
  CHECK(error("training.epochs=many") ==
        "--set training.epochs=many: training.epochs: expected an integer, got 'many'");
  CHECK(error("training.epoch=3") ==
        "--set training.epoch=3: training.epoch: unknown key (known: epochs, local_batch, "
        "optimizer, schedule, freeze, lr_groups)");
  CHECK(error("model.layers[9].dense.units=3") ==
        "--set model.layers[9].dense.units=3: model.layers has no item [9]");
  CHECK(error("training.epochs.x=3") ==
        "--set training.epochs.x=3: training.epochs is not a map of settings");
  CHECK(error("epochs") == "--set epochs: expected key.path=value, e.g. training.epochs=3");
  CHECK(error("training..epochs=3") ==
        "--set training..epochs=3: expected key.path=value, e.g. training.epochs=3");
}

TEST_CASE("a config must be UTF-8: the first other byte is an error at its line and column",
          "[config][errors]") {
  // Latin-1 'e acute' (0xE9) in a value on line 2, column 12.
  CHECK(error_of("run:\n  name: caf\xE9\nmodel: {layers: [relu]}\n") ==
        "t.yaml:2:12: byte 0xE9 is not UTF-8: a config must be UTF-8 text (convert it, e.g. iconv "
        "-f latin1 -t utf-8)");
  // In a comment too, and in a choice of the search space, where it would reach the journal.
  CHECK(error_of("# \xFF\nmodel: {layers: [relu]}\n").starts_with("t.yaml:1:3: byte 0xFF"));
  // The column counts characters, as an editor shows it: the e acute before it is one.
  CHECK(error_of("run: {name: \"\xC3\xA9\xFF\"}\nmodel: {layers: [relu]}\n")
            .starts_with("t.yaml:1:15: byte 0xFF"));
  // Overlong forms and surrogates are not UTF-8 either; well-formed multi-byte text is.
  CHECK(error_of("run: {name: \"\xC0\xAF\"}\nmodel: {layers: [relu]}\n")
            .starts_with("t.yaml:1:14: byte 0xC0"));
  CHECK(error_of("run: {name: \"\xED\xA0\x80\"}\nmodel: {layers: [relu]}\n")
            .starts_with("t.yaml:1:14: byte 0xED"));
  const Config ok = parse_config(
      with_data(
          "run: {name: \"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80\"}\nmodel: {layers: [relu]}\n"),
      "t.yaml");
  CHECK(ok.run.name == "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80");
  CHECK(error_of("model: {layers: [relu]}\n", {"run.name=x\xFF"}) ==
        "--set run.name=x\xFF: byte 0xFF at character 11 is not UTF-8");
  ::setenv("STRATA_TEST_LATIN1", "\xE9t\xE9", 1);
  CHECK(error_of("run: {name: \"${STRATA_TEST_LATIN1}\"}\nmodel: {layers: [relu]}\n") ==
        "t.yaml:1:13: '${STRATA_TEST_LATIN1}' expands to bytes that are not UTF-8 (an environment "
        "variable holds them)");
}

TEST_CASE("relative input paths are read from the config file's directory", "[config][paths]") {
  const std::string yaml = "data: {path: ../data/d.h5}\nmodel: {layers: [relu]}\n";
  CHECK(parse_config(yaml, "configs/a.yaml").data.path == "data/d.h5");
  CHECK(parse_config(yaml, "/site/project/configs/a.yaml").data.path == "/site/project/data/d.h5");
  CHECK(parse_config(yaml, "a.yaml").data.path == "../data/d.h5");  // the working directory's
  CHECK(parse_config("data: {path: /abs/d.h5}\nmodel: {layers: [relu]}\n", "configs/a.yaml")
            .data.path == "/abs/d.h5");
  // Outputs stay relative to the working directory: one config, a directory per job.
  CHECK(parse_config(yaml + "output: {dir: runs/x}\n", "configs/a.yaml").output.dir == "runs/x");
  const Config transfer = parse_config(
      yaml + "stages:\n  - transfer: {pretrained: ../w/weights.h5}\n", "configs/a.yaml");
  CHECK(std::get<strata::TransferSpec>(transfer.stages.front().settings).pretrained_path ==
        "w/weights.h5");
}

TEST_CASE("parallel.layout chooses members or data", "[config]") {
  const std::string model = "model: {layers: [relu]}\n";
  CHECK(parse_config(with_data(model), "t.yaml").parallel.layout == strata::RankLayout::members);
  CHECK(parse_config(with_data("parallel: {layout: data}\n" + model), "t.yaml").parallel.layout ==
        strata::RankLayout::data);
  CHECK(error_of("parallel: {layout: wide}\n" + model) ==
        "t.yaml:1:20: parallel.layout: unknown layout 'wide' (known: members, data)");
}
