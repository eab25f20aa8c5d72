// What makes ensemble members differ in their data: bootstrap samples draw rows of the training
// set with replacement, and feature subsets blank everything outside their region.
#include <catch2/catch.hpp>

#include <set>

#include "core/errors.hpp"
#include "ensemble/member_data.hpp"

using namespace strata;

namespace {

// n samples of 2x4x5 images whose pixels encode (sample, channel, row, col), labels = sample.
SampleSet numbered(std::int64_t n) {
  SampleSet set;
  set.images = Tensor({n, 2, 4, 5});
  for (std::int64_t i = 0; i < set.images.size(); ++i) set.images[i] = static_cast<float>(i + 1);
  for (std::int64_t s = 0; s < n; ++s) set.labels.push_back(static_cast<std::int32_t>(s));
  return set;
}

TrainingData numbered_data() {
  TrainingData data;
  data.train = numbered(50);
  data.validation = numbered(3);
  data.test = numbered(4);
  data.sample_shape = {2, 4, 5};
  data.num_classes = 50;
  return data;
}

}  // namespace

TEST_CASE("a bootstrap sample draws whole training rows with replacement", "[ensemble][data]") {
  const TrainingData data = numbered_data();
  const TrainingData a = bootstrap_sample(data, 11), b = bootstrap_sample(data, 12);
  REQUIRE(a.train.count() == data.train.count());
  std::set<std::int32_t> distinct;
  for (std::int64_t r = 0; r < a.train.count(); ++r) {
    const std::int32_t source = a.train.labels[static_cast<std::size_t>(r)];
    distinct.insert(source);
    // The row is the source row's pixels, whole.
    for (std::int64_t i = 0; i < 40; ++i)
      REQUIRE(a.train.images[r * 40 + i] == data.train.images[source * 40 + i]);
  }
  // With replacement: 50 draws of 50 almost surely repeat some rows (1 - 50!/50^50).
  CHECK(distinct.size() < 50);
  CHECK(a.train.labels != b.train.labels);  // another seed, another sample
  CHECK(bootstrap_sample(data, 11).train.labels == a.train.labels);
  CHECK(a.test.labels == data.test.labels);  // judged on the same sets
  CHECK(a.validation.images.values().size() == data.validation.images.values().size());
}

TEST_CASE("a feature subset keeps its region and blanks the rest in every set",
          "[ensemble][data]") {
  TrainingData data = numbered_data();
  const TrainingData original = data;
  FeatureSubset subset;
  subset.row_begin = 1;
  subset.row_end = 3;
  subset.col_begin = 2;  // to the edge
  subset.channels = {1};
  mask_features(data, subset, "m.yaml");
  for (const auto* sets : {&data.train, &data.validation, &data.test}) {
    const SampleSet& before = sets == &data.train        ? original.train
                              : sets == &data.validation ? original.validation
                                                         : original.test;
    std::int64_t i = 0;
    for (std::int64_t s = 0; s < sets->count(); ++s)
      for (int c = 0; c < 2; ++c)
        for (int y = 0; y < 4; ++y)
          for (int x = 0; x < 5; ++x, ++i) {
            const bool inside = c == 1 && y >= 1 && y < 3 && x >= 2;
            REQUIRE(sets->images[i] == (inside ? before.images[i] : 0.0f));
          }
  }
  FeatureSubset outside;
  outside.row_end = 9;
  outside.mark = {7, 9};
  CHECK_THROWS_WITH(mask_features(data, outside, "m.yaml"),
                    Catch::Matchers::Contains("m.yaml:7:9: feature_subsets: rows [0, 9)"));
  CHECK(describe(subset) == "rows 1-3, cols 2-end, channels 1");
}
