// The one table of names for the config's enums: the YAML reader takes them, to_string writes them
// (run.json, logs, reports), so a name is spelled in one place.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/config.hpp"

namespace strata {

template <class E>
struct Choice {
  std::string_view name;
  E value;
};

// Specialised for every enum a config spells by name: `choices` lists its names in the order the
// error messages show them.
template <class E>
struct EnumNames;

template <>
struct EnumNames<InitKind> {
  static constexpr std::array<Choice<InitKind>, 4> choices{
      {{"he", InitKind::he},
       {"glorot", InitKind::glorot},
       {"zeros", InitKind::zeros},
       {"uniform_fan_in", InitKind::uniform_fan_in}}};
};
template <>
struct EnumNames<DataSource> {
  static constexpr std::array<Choice<DataSource>, 2> choices{
      {{"hdf5", DataSource::hdf5}, {"synthetic", DataSource::synthetic}}};
};
template <>
struct EnumNames<DataRead> {
  static constexpr std::array<Choice<DataRead>, 2> choices{
      {{"memory", DataRead::memory}, {"shards", DataRead::shards}}};
};
template <>
struct EnumNames<OptimizerKind> {
  static constexpr std::array<Choice<OptimizerKind>, 2> choices{
      {{"sgd", OptimizerKind::sgd}, {"adam", OptimizerKind::adam}}};
};
template <>
struct EnumNames<ScheduleKind> {
  static constexpr std::array<Choice<ScheduleKind>, 3> choices{
      {{"constant", ScheduleKind::constant},
       {"step", ScheduleKind::step},
       {"cosine", ScheduleKind::cosine}}};
};
template <>
struct EnumNames<SplitKind> {
  static constexpr std::array<Choice<SplitKind>, 3> choices{
      {{"none", SplitKind::none}, {"column", SplitKind::column}, {"row", SplitKind::row}}};
};
template <>
struct EnumNames<LrScaling> {
  static constexpr std::array<Choice<LrScaling>, 2> choices{
      {{"linear", LrScaling::linear}, {"none", LrScaling::none}}};
};
template <>
struct EnumNames<ThreadSplit> {
  static constexpr std::array<Choice<ThreadSplit>, 3> choices{{{"auto", ThreadSplit::automatic},
                                                               {"batch", ThreadSplit::batch},
                                                               {"units", ThreadSplit::units}}};
};
template <>
struct EnumNames<DeviceChoice> {
  static constexpr std::array<Choice<DeviceChoice>, 3> choices{{{"auto", DeviceChoice::automatic},
                                                                {"cpu", DeviceChoice::cpu},
                                                                {"cuda", DeviceChoice::cuda}}};
};
template <>
struct EnumNames<AllreduceKind> {
  static constexpr std::array<Choice<AllreduceKind>, 4> choices{
      {{"auto", AllreduceKind::automatic},
       {"mpi", AllreduceKind::mpi},
       {"hierarchical", AllreduceKind::hierarchical},
       {"nccl", AllreduceKind::nccl}}};
};
template <>
struct EnumNames<RankLayout> {
  static constexpr std::array<Choice<RankLayout>, 2> choices{
      {{"members", RankLayout::members}, {"data", RankLayout::data}}};
};
template <>
struct EnumNames<SearchAlgorithm> {
  static constexpr std::array<Choice<SearchAlgorithm>, 6> choices{
      {{"genetic", SearchAlgorithm::genetic},
       {"random", SearchAlgorithm::random},
       {"grid", SearchAlgorithm::grid},
       {"tpe", SearchAlgorithm::tpe},
       {"gp", SearchAlgorithm::gp},
       {"pbt", SearchAlgorithm::pbt}}};
};
template <>
struct EnumNames<SearchSchedule> {
  static constexpr std::array<Choice<SearchSchedule>, 2> choices{
      {{"generational", SearchSchedule::generational},
       {"asynchronous", SearchSchedule::asynchronous}}};
};
template <>
struct EnumNames<PruneRule> {
  static constexpr std::array<Choice<PruneRule>, 3> choices{
      {{"none", PruneRule::none}, {"median", PruneRule::median}, {"asha", PruneRule::asha}}};
};
template <>
struct EnumNames<ParamKind> {
  static constexpr std::array<Choice<ParamKind>, 4> choices{
      {{"uniform", ParamKind::uniform},
       {"log_uniform", ParamKind::log_uniform},
       {"int", ParamKind::integer},
       {"choice", ParamKind::choice}}};
};
template <>
struct EnumNames<StageKind> {
  static constexpr std::array<Choice<StageKind>, 4> choices{{{"train", StageKind::train},
                                                             {"hpo", StageKind::hpo},
                                                             {"ensemble", StageKind::ensemble},
                                                             {"transfer", StageKind::transfer}}};
};
template <>
struct EnumNames<CombinerKind> {
  static constexpr std::array<Choice<CombinerKind>, 3> choices{
      {{"mean", CombinerKind::mean},
       {"weighted", CombinerKind::weighted},
       {"vote", CombinerKind::vote}}};
};

// The name the YAML uses for `value` (NUL-terminated: the names are literals).
template <class E>
requires requires {
  EnumNames<E>::choices;
}
const char* to_string(E value) {
  for (const auto& c : EnumNames<E>::choices)
    if (c.value == value) return c.name.data();
  return "unknown";
}

// The key path of the stage at `index` of the config's list, as messages name it
// ("stages[2].transfer"), so that a --set of that path is named for an error in it.
inline std::string stage_key(std::size_t index, StageKind kind) {
  return "stages[" + std::to_string(index) + "]." + to_string(kind);
}

}  // namespace strata
