// Parsing the model section: the layer list (kinds, parameters, model-parallel splits) or an
// analytic objective, and the layer kinds' names.
#include "core/model_config.hpp"

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config_names.hpp"

namespace strata {
namespace {

using namespace config_reader;

struct LayerKindInfo {
  LayerKind kind;
  std::string_view name;
  Keys params;
};

constexpr std::string_view dense_params[] = {"units", "init", "split", "name"};
constexpr std::string_view conv_params[] = {"filters", "kernel", "stride", "padding",
                                            "init",    "split",  "name"};
constexpr std::string_view pool_params[] = {"size", "stride", "name"};
constexpr std::string_view dropout_params[] = {"rate", "name"};
constexpr std::string_view leaky_params[] = {"alpha", "name"};
constexpr std::string_view name_only[] = {"name"};

constexpr std::array<LayerKindInfo, 10> layer_kinds{{
    {LayerKind::dense, "dense", dense_params},
    {LayerKind::conv2d, "conv2d", conv_params},
    {LayerKind::maxpool2d, "maxpool2d", pool_params},
    {LayerKind::avgpool2d, "avgpool2d", pool_params},
    {LayerKind::flatten, "flatten", name_only},
    {LayerKind::dropout, "dropout", dropout_params},
    {LayerKind::relu, "relu", name_only},
    {LayerKind::tanh, "tanh", name_only},
    {LayerKind::sigmoid, "sigmoid", name_only},
    {LayerKind::leaky_relu, "leaky_relu", leaky_params},
}};

const LayerKindInfo& find_layer_kind(const Reader& kind_at) {
  const std::string name = kind_at.as_string();
  for (const auto& info : layer_kinds)
    if (info.name == name) return info;
  std::string known;
  for (const auto& info : layer_kinds)
    known += known.empty() ? std::string(info.name) : fmt::format(", {}", info.name);
  kind_at.fail(fmt::format("unknown layer kind '{}' (known: {})", name, known));
}

// A layer item is "kind" or "kind: {params}"; returns where the kind is written and the params.
std::pair<Reader, Reader> split_layer_item(const Reader& item) {
  if (item.node().IsScalar()) {
    const Reader params = item.with(YAML::Node(YAML::NodeType::Null),
                                    join_path(item.path(), item.node().Scalar()), item.mark());
    return {item, params};
  }
  if (!item.node().IsMap())
    item.fail(fmt::format("expected a layer kind or 'kind: {{params}}', got {}", item.found()));
  const MapReader entries(item);
  if (entries.size() != 1)
    // The usual cause is parameters indented at the kind's level instead of under it.
    item.fail(
        fmt::format("expected one layer kind per list item, got {} keys ({}); put the parameters "
                    "in a map under the kind",
                    entries.size(), fmt::join(entries.keys(), ", ")));
  auto [key_at, params] = entries.first_entry();
  return {item.with(key_at.node(), item.path(), key_at.mark()), params};
}

struct ParsedLayer {
  LayerSpec spec;
  Reader name_at;  // where the name was given, or the item itself for a default name
};

void read_layer_params(const MapReader& params, LayerSpec& spec) {
  read(params, "units", spec.units, at_least_1);
  read(params, "filters", spec.filters, at_least_1);
  read(params, "kernel", spec.kernel, at_least_1);
  read(params, "stride", spec.stride, at_least_1);
  read(params, "padding", spec.padding, at_least_0);
  read(params, "size", spec.size, at_least_1);
  read(params, "rate", spec.rate, zero_to_one_open);
  read(params, "alpha", spec.alpha, non_negative);
  read(params, "init", spec.init, EnumNames<InitKind>::choices, "init");
  read(params, "name", spec.name);
}

constexpr std::array<Choice<SplitKind>, 2> conv_split_choices{{
    {"none", SplitKind::none},
    {"column", SplitKind::column},
}};

ParsedLayer parse_layer(const Reader& item, std::size_t index) {
  const auto [kind_at, params_at] = split_layer_item(item);
  const LayerKindInfo& info = find_layer_kind(kind_at);
  const MapReader params(params_at);
  params.allow_only(info.params);

  LayerSpec spec;
  spec.kind = info.kind;
  spec.mark = item.mark();
  spec.name = fmt::format("{}_{}", info.name, index);
  read_layer_params(params, spec);
  // A conv has no row split: its input channels stay whole on every shard.
  if (info.kind == LayerKind::conv2d)
    read(params, "split", spec.split, conv_split_choices, "split");
  else
    read(params, "split", spec.split, EnumNames<SplitKind>::choices, "split");

  if (info.kind == LayerKind::dense) params.require("units");
  if (info.kind == LayerKind::conv2d) {
    params.require("filters");
    params.require("kernel");
  }
  const bool is_pool = info.kind == LayerKind::maxpool2d || info.kind == LayerKind::avgpool2d;
  if (is_pool && !params.get("stride")) spec.stride = spec.size;

  auto name_at = params.get("name");
  return {spec, name_at ? *name_at : item};
}

std::vector<LayerSpec> parse_layers(const Reader& list) {
  if (!list.node().IsSequence() || list.node().size() == 0)
    list.fail(fmt::format("expected a non-empty list of layers, got {}", list.found()));
  std::vector<LayerSpec> layers;
  std::map<std::string, std::string, std::less<>> first_use;  // name -> path of the layer using it
  for (std::size_t i = 0; i < list.node().size(); ++i) {
    const Reader item = list.item(i, list.node()[i]);
    ParsedLayer layer = parse_layer(item, i);
    const auto [it, inserted] = first_use.emplace(layer.spec.name, item.path());
    if (!inserted)
      layer.name_at.fail(
          fmt::format("duplicate layer name '{}' (also used by {})", layer.spec.name, it->second));
    layers.push_back(std::move(layer.spec));
  }
  return layers;
}

bool is_elementwise(LayerKind kind) {
  return kind == LayerKind::relu || kind == LayerKind::tanh || kind == LayerKind::sigmoid ||
         kind == LayerKind::leaky_relu || kind == LayerKind::dropout;
}

// A row-split dense layer reads the column-split layer's partitioned output, so only elementwise
// layers may stand between them.
void check_splits(const Reader& layers_at, const std::vector<LayerSpec>& layers) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].split != SplitKind::row) continue;
    std::size_t j = i;
    while (j > 0 && is_elementwise(layers[j - 1].kind)) --j;
    const bool after_column =
        j > 0 && layers[j - 1].kind == LayerKind::dense && layers[j - 1].split == SplitKind::column;
    if (!after_column)
      layers_at.item(i, layers_at.node()[i])
          .fail(
              "split: row needs a dense layer with split: column before it, with only activations "
              "or "
              "dropout between");
  }
}

constexpr std::array<Choice<int>, 4> objective_choices{{
    {"rastrigin", 0},
    {"sphere", 1},
    {"rosenbrock", 2},
    {"ackley", 3},
}};

std::vector<LayerSpec> parse_layer_list(const MapReader& m) {
  const Reader layers_at = m.require("layers");
  auto layers = parse_layers(layers_at);
  check_splits(layers_at, layers);
  return layers;
}

}  // namespace

// Either layers to train or an analytic objective, never both.
void config_reader::parse_model(const MapReader& m, Config& config) {
  static constexpr std::string_view known[] = {"layers", "objective", "dims", "eval_seconds",
                                               "eval_stddev_seconds"};
  m.allow_only(known);
  const auto objective_at = m.get("objective");
  if (!objective_at) {
    static constexpr std::string_view layers_only[] = {"layers"};
    m.allow_only(layers_only);
    config.layers = parse_layer_list(m);
    return;
  }
  if (auto layers_at = m.get("layers"))
    layers_at->fail("a model has either layers or an objective, not both");
  ObjectiveSpec objective;
  objective.name = objective_choices[static_cast<std::size_t>(
                                         objective_at->as_choice(objective_choices, "objective"))]
                       .name;
  objective.dims = m.require("dims").as_int(at_least_1);
  read(m, "eval_seconds", objective.eval_seconds, non_negative);
  read(m, "eval_stddev_seconds", objective.eval_stddev_seconds, non_negative);
  config.objective = objective;
}

const char* to_string(LayerKind kind) {
  for (const auto& info : layer_kinds)
    if (info.kind == kind) return info.name.data();  // the names are literals, so NUL-terminated
  return "unknown";
}

}  // namespace strata
