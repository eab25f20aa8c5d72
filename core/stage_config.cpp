#include "core/stage_config.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/search_config.hpp"

namespace strata::config_reader {

namespace {

// "[begin, end)" of a row or column range, 0 <= begin < end.
std::pair<int, int> parse_range(const Reader& at) {
  const YAML::Node& list = at.node();
  if (!list.IsSequence() || list.size() != 2)
    at.fail(fmt::format("expected [begin, end), got {}", at.found()));
  const int begin = at.item(0, list[0]).as_int(IntRange{0});
  const int end = at.item(1, list[1]).as_int(IntRange{1});
  if (begin >= end) at.fail(fmt::format("expected begin < end, got [{}, {}]", begin, end));
  return {begin, end};
}

FeatureSubset parse_feature_subset(const Reader& at) {
  const MapReader m(at);
  static constexpr std::string_view known[] = {"rows", "cols", "channels"};
  m.allow_only(known);
  if (m.size() == 0) at.fail("expected at least one of rows, cols, channels");
  FeatureSubset f;
  f.mark = at.mark();
  if (auto r = m.get("rows")) std::tie(f.row_begin, f.row_end) = parse_range(*r);
  if (auto c = m.get("cols")) std::tie(f.col_begin, f.col_end) = parse_range(*c);
  if (auto ch = m.get("channels")) {
    if (!ch->node().IsSequence() || ch->node().size() == 0)
      ch->fail(fmt::format("expected a non-empty list of channel indices, got {}", ch->found()));
    for (std::size_t i = 0; i < ch->node().size(); ++i)
      f.channels.push_back(ch->item(i, ch->node()[i]).as_int(IntRange{0}));
  }
  return f;
}

EnsembleSpec parse_ensemble(const MapReader& m) {
  static constexpr std::string_view known[] = {
      "from", "members", "seeds", "bagging", "feature_subsets", "combiners", "epochs", "parallel"};
  m.allow_only(known);
  EnsembleSpec e;
  if (auto f = m.get("from")) e.from = ArtifactRef{f->as_nonempty_string(), f->mark()};
  read(m, "members", e.members, IntRange{2});
  read(m, "seeds", e.seeds, IntRange{1});
  read(m, "bagging", e.bagging, IntRange{1});
  read(m, "epochs", e.epochs, IntRange{1});
  if (auto list = m.get("feature_subsets")) {
    if (!list->node().IsSequence() || list->node().size() == 0)
      list->fail(
          fmt::format("expected a non-empty list of subsets, e.g. [{{rows: [0, 14]}}, "
                      "{{rows: [14, 28]}}], got {}",
                      list->found()));
    for (std::size_t i = 0; i < list->node().size(); ++i)
      e.feature_subsets.push_back(parse_feature_subset(list->item(i, list->node()[i])));
  }
  if (auto list = m.get("combiners")) {
    if (!list->node().IsSequence() || list->node().size() == 0)
      list->fail(
          fmt::format("expected a non-empty list of mean, weighted, vote, got {}", list->found()));
    e.combiners.clear();
    for (std::size_t i = 0; i < list->node().size(); ++i) {
      const Reader item = list->item(i, list->node()[i]);
      const CombinerKind kind = item.as_choice(EnumNames<CombinerKind>::choices, "combiner");
      if (std::find(e.combiners.begin(), e.combiners.end(), kind) != e.combiners.end())
        item.fail(fmt::format("'{}' is listed twice", to_string(kind)));
      e.combiners.push_back(kind);
    }
  }
  // One kind of variation per stage, so that member i's meaning is plain.
  std::vector<std::string> given;
  for (const char* key : {"seeds", "bagging", "feature_subsets"})
    if (m.get(key)) given.emplace_back(key);
  if (given.size() > 1)
    m.get(given[1])->fail(fmt::format("choose one of seeds, bagging and feature_subsets, not {}",
                                      fmt::join(given, " and ")));
  if (!e.from && given.empty())
    m.where().fail(
        "an ensemble needs members: 'from: hpo.top_k' (an earlier search's best configs), "
        "'seeds: n', 'bagging: n' or 'feature_subsets: [...]'");
  return e;
}

}  // namespace

std::vector<FrozenLayer> parse_layer_names(const Reader& at) {
  if (!at.node().IsSequence())
    at.fail(fmt::format("expected a list of layer names, got {}", at.found()));
  std::vector<FrozenLayer> names;
  for (std::size_t i = 0; i < at.node().size(); ++i) {
    const Reader name = at.item(i, at.node()[i]);
    names.push_back({name.as_nonempty_string(), name.mark()});
  }
  return names;
}

bool names_artifact(const std::string& text) {
  const auto dot = text.find('.');
  if (dot == std::string::npos || dot == 0 || text.find('/') != std::string::npos ||
      text.ends_with(".h5"))
    return false;
  return std::all_of(text.begin(), text.end(), [](char ch) {
    return std::islower(static_cast<unsigned char>(ch)) != 0 ||
           std::isdigit(static_cast<unsigned char>(ch)) != 0 || ch == '.' || ch == '_';
  });
}

namespace {

TransferSpec parse_transfer(const MapReader& m) {
  static constexpr std::string_view known[] = {
      "pretrained",  "classes", "samples_per_class", "freeze",   "head",
      "lr_groups",   "epochs",  "compare_scratch",   "parallel", "hierarchical",
      "local_batch", "lr"};
  m.allow_only(known);
  TransferSpec t;
  if (auto h = m.get("hierarchical")) {
    const MapReader groups(*h);
    if (groups.size() < 2)
      h->fail(
          "expected at least 2 super-classes, e.g. {tops: [0, 2, 3, 4, 6], footwear: [5, 7, "
          "9], other: [1, 8]}");
    for (const auto& name : groups.keys()) {
      const Reader list = *groups.get(name);
      t.hierarchy.push_back({name, parse_class_list(list), list.mark()});
    }
    for (const char* key : {"classes", "samples_per_class", "head", "compare_scratch"})
      if (auto k = m.get(key))
        k->fail(
            "a hierarchical transfer sets its own label sets and heads, and compares with a "
            "flat model; leave this out");
  }
  // A hierarchical transfer may start from scratch; a plain one needs its weights.
  const std::optional<Reader> pretrained =
      t.hierarchy.empty() ? std::optional(m.require("pretrained")) : m.get("pretrained");
  if (pretrained) {
    const std::string source = pretrained->as_nonempty_string();
    t.pretrained_mark = pretrained->mark();
    if (names_artifact(source))
      t.pretrained_artifact = ArtifactRef{source, pretrained->mark()};
    else
      t.pretrained_path = source;
  }
  if (auto c = m.get("classes")) t.classes = parse_class_list(*c);
  read(m, "samples_per_class", t.samples_per_class, at_least_0);
  if (auto f = m.get("freeze")) t.freeze = parse_layer_names(*f);
  if (auto h = m.get("head")) t.head = parse_layer_names(*h);
  if (auto g = m.get("lr_groups")) t.lr_groups = parse_lr_groups(*g);
  read(m, "epochs", t.epochs, IntRange{1});
  read(m, "local_batch", t.local_batch, IntRange{1});
  read(m, "lr", t.lr, positive);
  read(m, "compare_scratch", t.compare_scratch);
  return t;
}

StageSpec parse_stage(const Reader& item) {
  StageSpec stage;
  stage.mark = item.mark();
  if (item.node().IsScalar()) {
    const StageKind kind = item.as_choice(EnumNames<StageKind>::choices, "stage");
    if (kind != StageKind::train)
      item.fail(fmt::format("the {0} stage needs its settings: '- {0}: {{...}}'", to_string(kind)));
    return stage;
  }
  if (!item.node().IsMap())
    item.fail(fmt::format("expected a stage name or 'stage: {{params}}', got {}", item.found()));
  const MapReader entries(item);
  if (entries.size() != 1)
    item.fail(fmt::format("expected one stage per list item, got {} keys ({})", entries.size(),
                          fmt::join(entries.keys(), ", ")));
  const auto [key_at, params_at] = entries.first_entry();
  const StageKind kind = item.with(key_at.node(), item.path(), key_at.mark())
                             .as_choice(EnumNames<StageKind>::choices, "stage");
  const MapReader params(params_at);
  switch (kind) {
    case StageKind::train:
      params.allow_only(std::array<std::string_view, 1>{"parallel"});
      break;
    case StageKind::hpo:
      stage.settings = parse_hpo(params);
      break;
    case StageKind::ensemble:
      stage.settings = parse_ensemble(params);
      break;
    case StageKind::transfer:
      stage.settings = parse_transfer(params);
      break;
  }
  return stage;
}

}  // namespace

std::vector<StageSpec> parse_stages(const Reader& list) {
  if (!list.node().IsSequence() || list.node().size() == 0)
    list.fail(fmt::format("expected a non-empty list of stages, got {}", list.found()));
  std::vector<StageSpec> stages;
  for (std::size_t i = 0; i < list.node().size(); ++i)
    stages.push_back(parse_stage(list.item(i, list.node()[i])));
  return stages;
}

void read_stage_parallel(const Reader& list, const ParallelConfig& run,
                         std::vector<StageSpec>& stages) {
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const Reader item = list.item(i, list.node()[i]);
    if (!item.node().IsMap()) continue;
    const auto [key_at, params_at] = MapReader(item).first_entry();
    if (!params_at.node().IsMap()) continue;
    if (auto p = MapReader(params_at).get("parallel")) {
      ParallelConfig parallel = parse_parallel(MapReader(*p), run);
      parallel.mark = p->mark();
      stages[i].parallel = parallel;
    }
  }
}

}  // namespace strata::config_reader

namespace strata {

Config stage_config(const Config& config, const StageSpec& stage) {
  Config out = config;
  if (stage.parallel) out.parallel = *stage.parallel;
  return out;
}

}  // namespace strata
