// HDF5 wrapper, dataset layout reader/writer, synthetic generator and IDX importer.
#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/dataset.hpp"
#include "core/errors.hpp"
#include "core/hdf5_file.hpp"
#include "core/training_data.hpp"
#include "tests/core/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using strata::DataError;
using strata::Dataset;
using strata::LabeledImages;

namespace {

using strata::testing::TempDir;

LabeledImages patterned_split(std::int64_t count, int channels, int height, int width,
                              int num_classes, int salt) {
  LabeledImages split;
  split.count = count;
  split.channels = channels;
  split.height = height;
  split.width = width;
  split.pixels.resize(static_cast<std::size_t>(count * split.sample_size()));
  for (std::size_t i = 0; i < split.pixels.size(); ++i)
    split.pixels[i] = static_cast<std::uint8_t>((i * 7 + salt) % 256);
  split.labels.resize(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < split.labels.size(); ++i) {
    split.labels[i] = static_cast<std::uint8_t>((i * 3 + salt) % num_classes);
  }
  return split;
}

// Deliberately not the defaults anywhere: 3 channels, non-square images, odd counts.
Dataset small_dataset(int channels = 3) {
  Dataset d;
  d.num_classes = 7;
  d.train = patterned_split(5, channels, 4, 2, d.num_classes, 1);
  d.test = patterned_split(3, channels, 4, 2, d.num_classes, 2);
  d.source = "unit test \xc3\xa9";  // non-ASCII UTF-8 survives the string attribute
  return d;
}

bool same_split(const LabeledImages& a, const LabeledImages& b) {
  return a.count == b.count && a.channels == b.channels && a.height == b.height &&
         a.width == b.width && a.pixels == b.pixels && a.real_pixels == b.real_pixels &&
         a.labels == b.labels;
}

bool same_dataset(const Dataset& a, const Dataset& b) {
  return same_split(a.train, b.train) && same_split(a.test, b.test) &&
         a.num_classes == b.num_classes && a.source == b.source;
}

// Runs `action`, which must throw DataError, and returns the message.
template <typename Action>
std::string data_error_message(Action&& action) {
  try {
    action();
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("expected strata::DataError");
  return {};
}

// Ways to break the layout; write_dataset refuses to produce broken files, so tests write them
// here.
struct Damage {
  bool drop_test_labels = false;
  bool drop_num_classes = false;
  bool flat_train_images = false;       // rank 2 instead of [N,H,W]
  std::int64_t train_label_count = -1;  // write only this many train labels
};

void write_damaged(const std::string& path, const Dataset& d, const Damage& damage) {
  auto file = strata::h5::File::create(path);
  for (const auto* name : {"train", "test"}) {
    const LabeledImages& s = std::string(name) == "train" ? d.train : d.test;
    const bool train = std::string(name) == "train";
    std::vector<std::int64_t> shape{s.count, s.height, s.width};
    if (s.channels != 1) shape.insert(shape.begin() + 1, s.channels);
    if (train && damage.flat_train_images) shape = {s.count, s.sample_size()};
    file.write_u8(fmt::format("/{}/images", name), shape, s.pixels.data());
    std::int64_t labels = s.count;
    if (train && damage.train_label_count >= 0) labels = damage.train_label_count;
    if (!train && damage.drop_test_labels) continue;
    file.write_u8(fmt::format("/{}/labels", name), {labels}, s.labels.data());
  }
  if (!damage.drop_num_classes) file.write_attr_int("/", "num_classes", d.num_classes);
  file.write_attr_string("/", "source", d.source);
}

Dataset ten_class_dataset() {
  Dataset d;
  d.num_classes = 10;
  d.train = patterned_split(8, 1, 4, 4, 10, 3);
  d.test = patterned_split(6, 1, 4, 4, 10, 4);
  d.source = "damage test";
  return d;
}

// Writes a gzipped IDX file: big-endian magic and dimensions, then the bytes.
void write_idx_gz(const std::string& path, std::uint32_t magic,
                  const std::vector<std::uint32_t>& dims,
                  const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> bytes;
  auto put_u32 = [&](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<std::uint8_t>(v >> shift));
  };
  put_u32(magic);
  for (auto d : dims) put_u32(d);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  gzFile gz = gzopen(path.c_str(), "wb");
  REQUIRE(gz != nullptr);
  const int written = gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  const int closed = gzclose(gz);
  REQUIRE(written == static_cast<int>(bytes.size()));
  REQUIRE(closed == Z_OK);
}

// A tiny, valid IDX directory: 4 training and 2 test images of 3x2 pixels, labels 0..2.
void write_small_idx(const TempDir& dir) {
  std::vector<std::uint8_t> train_pixels(24), test_pixels(12);  // 4 and 2 images of 3x2
  for (std::size_t i = 0; i < train_pixels.size(); ++i)
    train_pixels[i] = static_cast<std::uint8_t>(i * 10);
  for (std::size_t i = 0; i < test_pixels.size(); ++i)
    test_pixels[i] = static_cast<std::uint8_t>(255 - i);
  write_idx_gz(dir.file("train-images-idx3-ubyte.gz"), 0x803, {4, 3, 2}, train_pixels);
  write_idx_gz(dir.file("train-labels-idx1-ubyte.gz"), 0x801, {4}, {0, 2, 1, 2});
  write_idx_gz(dir.file("t10k-images-idx3-ubyte.gz"), 0x803, {2, 3, 2}, test_pixels);
  write_idx_gz(dir.file("t10k-labels-idx1-ubyte.gz"), 0x801, {2}, {1, 0});
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

}  // namespace

TEST_CASE("h5::Handle move assignment closes the old id and reset closes the new one", "[hdf5]") {
  strata::h5::Handle a(H5Screate(H5S_SCALAR), H5Sclose);
  strata::h5::Handle b(H5Screate(H5S_SCALAR), H5Sclose);
  const hid_t a_id = a.get();
  const hid_t b_id = b.get();
  REQUIRE(H5Iis_valid(a_id) > 0);
  REQUIRE(H5Iis_valid(b_id) > 0);

  a = std::move(b);
  CHECK(H5Iis_valid(a_id) == 0);
  CHECK(a.get() == b_id);
  CHECK_FALSE(b.valid());  // NOLINT(bugprone-use-after-move): moved-from state is specified

  strata::h5::Handle c(std::move(a));
  CHECK(c.get() == b_id);
  CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move)
  c.reset();
  CHECK_FALSE(c.valid());
  CHECK(H5Iis_valid(b_id) == 0);
}

TEST_CASE("h5::File creates intermediate groups and answers exists() for any path", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("groups.h5");
  auto file = strata::h5::File::create(path);
  const std::vector<float> values{1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  file.write_f32("/a/b/c", {3, 2}, values.data());
  file.create_group("/g/h");
  file.create_group("/g/h");  // idempotent

  CHECK(file.exists("/a"));
  CHECK(file.exists("/a/b"));
  CHECK(file.exists("a/b/c"));
  CHECK(file.exists("/g/h"));
  CHECK_FALSE(file.exists("/a/b/c/d"));  // below a dataset
  CHECK_FALSE(file.exists("/x/y/z"));
  CHECK(file.shape("/a/b/c") == std::vector<std::int64_t>{3, 2});

  std::vector<float> back;
  file.read_f32("/a/b/c", back);
  CHECK(back == values);
  CHECK_THAT(data_error_message([&] {
               file.write_f32("/a/b/c", {3, 2}, values.data());
             }),
             StartsWith(path) && Contains("dataset /a/b/c: already exists"));
  CHECK_THAT(data_error_message([&] { file.shape("/a/nothing"); }),
             StartsWith(path) && Contains("dataset /a/nothing: not found"));
  // Pixels stored as floats must not be silently saturated into bytes.
  std::vector<std::uint8_t> bytes;
  CHECK_THAT(data_error_message([&] { file.read_u8("/a/b/c", bytes); }),
             Contains("not an integer type"));

  CHECK_THAT(data_error_message([&] { strata::h5::File::create(dir.file("no/such/dir/x.h5")); }),
             Contains("x.h5") && Contains("cannot create HDF5 file"));
}

TEST_CASE("an unfinished file's integer attributes are rewritten in place", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("frame.h5");
  const std::vector<float> values{1.0f, 2.0f};
  strata::h5::File::write_new(path, [&](strata::h5::File& file) {
    file.write_f32("/t", {2}, values.data());
    file.write_attr_int("/t", "crc32", 0);
    file.write_attr_string("/t", "note", "text");
  });
  const auto size = fs::file_size(path);
  strata::h5::File::change_unfinished(path, [](strata::h5::File& file) {
    file.write_attr_int("/t", "crc32", 0x89abcdef);
    file.write_attr_int("/t", "note", 7);  // another type: replaced
  });
  CHECK(fs::file_size(path) == size);
  {
    const auto file = strata::h5::File::open_read(path);
    CHECK(file.read_attr_int("/t", "crc32") == 0x89abcdef);
    CHECK(file.read_attr_int("/t", "note") == 7);
  }

  // A change that fails leaves the file emptied, but for what HDF5 writes as it closes it (the
  // caller removes it); one that cannot open the file says so.
  CHECK_THAT(data_error_message([&] {
               strata::h5::File::change_unfinished(path, [](strata::h5::File& file) {
                 file.write_attr_int("/missing", "crc32", 1);
               });
             }),
             StartsWith(path) && Contains("/missing"));
  CHECK(fs::file_size(path) < 200);
  CHECK_THAT(data_error_message([&] {
               strata::h5::File::change_unfinished(dir.file("absent.h5"), [](strata::h5::File&) {});
             }),
             Contains("absent.h5") && Contains("cannot open for writing"));
}

TEST_CASE("string attributes are read whether variable or fixed length", "[hdf5]") {
  TempDir dir;
  const std::string path = dir.file("attrs.h5");
  {
    auto file = strata::h5::File::create(path);
    using strata::h5::Handle;
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);

    // What h5py writes for `f.attrs["vlen"] = "..."`: a scalar variable-length UTF-8 string.
    Handle vlen(H5Tcopy(H5T_C_S1), H5Tclose);
    REQUIRE(H5Tset_size(vlen.get(), H5T_VARIABLE) >= 0);
    REQUIRE(H5Tset_cset(vlen.get(), H5T_CSET_UTF8) >= 0);
    Handle a1(H5Acreate2(file.id(), "vlen", vlen.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
    const char* text = "caf\xc3\xa9 h5py";
    REQUIRE(H5Awrite(a1.get(), vlen.get(), &text) >= 0);

    // Fixed-length, NUL-terminated within a larger buffer.
    Handle fixed(H5Tcopy(H5T_C_S1), H5Tclose);
    REQUIRE(H5Tset_size(fixed.get(), 16) >= 0);
    Handle a2(H5Acreate2(file.id(), "fixed", fixed.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
    char fixed_text[16] = "idx:fashion";
    REQUIRE(H5Awrite(a2.get(), fixed.get(), fixed_text) >= 0);

    // Fixed-length, space padded (Fortran style).
    Handle padded(H5Tcopy(H5T_FORTRAN_S1), H5Tclose);
    REQUIRE(H5Tset_size(padded.get(), 8) >= 0);
    Handle a3(H5Acreate2(file.id(), "padded", padded.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
    const char padded_text[8] = {'x', 'y', 'z', ' ', ' ', ' ', ' ', ' '};
    REQUIRE(H5Awrite(a3.get(), padded.get(), padded_text) >= 0);

    file.write_attr_string("/", "ours", "written by strata");
    file.write_attr_string("/", "ours", "replaced");  // rewriting an attribute replaces it
    file.write_attr_int("/", "count", -42);
  }
  const auto file = strata::h5::File::open_read(path);
  CHECK(file.read_attr_string("/", "vlen") == "caf\xc3\xa9 h5py");
  CHECK(file.read_attr_string("/", "fixed") == "idx:fashion");
  CHECK(file.read_attr_string("/", "padded") == "xyz");
  CHECK(file.read_attr_string("/", "ours") == "replaced");
  CHECK(file.read_attr_int("/", "count") == -42);
  CHECK(file.has_attr("/", "count"));
  CHECK_FALSE(file.has_attr("/", "absent"));
  CHECK_FALSE(file.has_attr("/no/group", "count"));
  CHECK_THAT(data_error_message([&] { file.read_attr_int("/", "vlen"); }),
             StartsWith(path) && Contains("attribute vlen of /: is not an integer"));
  CHECK_THAT(data_error_message([&] { file.read_attr_string("/", "count"); }),
             Contains("is not a string"));
  CHECK_THAT(data_error_message([&] { file.read_attr_int("/", "absent"); }),
             Contains("attribute absent of /: not found"));
}

TEST_CASE("write_dataset and read_dataset round-trip every field", "[dataset]") {
  TempDir dir;
  const Dataset original = small_dataset();
  REQUIRE_FALSE(same_dataset(Dataset{}, original));  // the comparison can see a difference at all

  const std::string path = dir.file("round.h5");
  strata::write_dataset(path, original);
  const Dataset back = strata::read_dataset(path);
  CHECK(back.train.count == 5);
  CHECK(back.train.channels == 3);
  CHECK(back.train.height == 4);
  CHECK(back.train.width == 2);
  CHECK(back.train.pixels == original.train.pixels);
  CHECK(back.train.labels == original.train.labels);
  CHECK(back.test.count == 3);
  CHECK(back.test.pixels == original.test.pixels);
  CHECK(back.test.labels == original.test.labels);
  CHECK(back.num_classes == 7);
  CHECK(back.source == original.source);
  CHECK(same_dataset(back, original));
  CHECK(strata::h5::File::open_read(path).shape("/train/images") ==
        std::vector<std::int64_t>{5, 3, 4, 2});

  SECTION("single-channel images are stored as [N,H,W]") {
    const Dataset gray = small_dataset(1);
    const std::string gray_path = dir.file("gray.h5");
    strata::write_dataset(gray_path, gray);
    CHECK(strata::h5::File::open_read(gray_path).shape("/test/images") ==
          std::vector<std::int64_t>{3, 4, 2});
    CHECK(same_dataset(strata::read_dataset(gray_path), gray));
  }
  SECTION("write_dataset refuses inconsistent data") {
    Dataset bad = small_dataset();
    bad.train.labels[2] = 7;
    CHECK_THROWS_AS(strata::write_dataset(dir.file("bad.h5"), bad), std::invalid_argument);
    bad = small_dataset();
    bad.test.pixels.pop_back();
    CHECK_THROWS_AS(strata::write_dataset(dir.file("bad.h5"), bad), std::invalid_argument);
  }
}

TEST_CASE("read limits and row ranges read hyperslabs", "[dataset][hdf5]") {
  TempDir dir;
  const Dataset full = small_dataset();
  const std::string path = dir.file("slab.h5");
  strata::write_dataset(path, full);
  const std::int64_t sample = full.train.sample_size();

  const Dataset part = strata::read_dataset(path, 2, 1);
  CHECK(part.train.count == 2);
  CHECK(part.test.count == 1);
  CHECK(part.train.pixels == std::vector<std::uint8_t>(full.train.pixels.begin(),
                                                       full.train.pixels.begin() + 2 * sample));
  CHECK(part.train.labels ==
        std::vector<std::uint8_t>(full.train.labels.begin(), full.train.labels.begin() + 2));
  CHECK(part.test.pixels ==
        std::vector<std::uint8_t>(full.test.pixels.begin(), full.test.pixels.begin() + sample));
  CHECK(part.test.labels == std::vector<std::uint8_t>{full.test.labels[0]});
  CHECK(same_dataset(strata::read_dataset(path, 100, 0), full));  // limits beyond N read everything

  const auto file = strata::h5::File::open_read(path);
  std::vector<std::uint8_t> rows;
  file.read_u8("/train/images", rows, 1, 3);
  CHECK(rows == std::vector<std::uint8_t>(full.train.pixels.begin() + sample,
                                          full.train.pixels.begin() + 4 * sample));
  file.read_u8("/train/images", rows, 4);
  CHECK(rows ==
        std::vector<std::uint8_t>(full.train.pixels.begin() + 4 * sample, full.train.pixels.end()));
  file.read_u8("/train/images", rows, 5, 0);
  CHECK(rows.empty());
  std::vector<float> labels;
  file.read_f32("/test/labels", labels, 1, 2);  // HDF5 converts uint8 to float
  CHECK(labels == std::vector<float>{float(full.test.labels[1]), float(full.test.labels[2])});

  CHECK_THAT(data_error_message([&] { file.read_u8("/train/images", rows, 3, 3); }),
             StartsWith(path) && Contains("/train/images") &&
                 Contains("rows [3, 6) are out of range for 5 rows"));
  CHECK_THAT(data_error_message([&] { file.read_u8("/train/images", rows, 6); }),
             Contains("first row 6 is out of range"));
  CHECK_THAT(data_error_message([&] { file.read_u8("/train/images", rows, -1, 1); }),
             Contains("out of range"));
}

TEST_CASE("read_dataset names the file and the problem", "[dataset]") {
  TempDir dir;
  const Dataset good = ten_class_dataset();

  SECTION("missing file") {
    const std::string path = dir.file("absent.h5");
    CHECK_THAT(data_error_message([&] { strata::read_dataset(path); }),
               StartsWith(path) && Contains("not found"));
  }
  SECTION("not an HDF5 file") {
    const std::string path = dir.file("text.h5");
    write_all(path, {'h', 'e', 'l', 'l', 'o'});
    CHECK_THAT(data_error_message([&] { strata::read_dataset(path); }),
               StartsWith(path) && Contains("not an HDF5 file"));
  }
  SECTION("truncated HDF5 file") {
    const std::string path = dir.file("truncated.h5");
    Dataset big = good;
    big.train = patterned_split(64, 1, 16, 16, 10, 5);
    strata::write_dataset(path, big);
    fs::resize_file(path, fs::file_size(path) / 2);
    CHECK_THAT(data_error_message([&] { strata::read_dataset(path); }),
               StartsWith(path) && Contains("truncated"));
  }
  SECTION("missing /test/labels") {
    const std::string path = dir.file("nolabels.h5");
    write_damaged(path, good, {.drop_test_labels = true});
    CHECK_THAT(data_error_message([&] { strata::read_dataset(path); }),
               StartsWith(path) && Contains("/test/labels is missing"));
  }
  SECTION("label count differs from image count") {
    const std::string path = dir.file("count.h5");
    write_damaged(path, good, {.train_label_count = 7});
    CHECK_THAT(data_error_message([&] { strata::read_dataset(path); }),
               StartsWith(path) && Contains("/train/labels has 7 entries but /train/images has 8"));
  }
  SECTION("label not below num_classes") {
    const std::string path = dir.file("label.h5");
    Dataset bad = good;
    bad.test.labels[5] = 12;
    write_damaged(path, bad, {});
    CHECK_THAT(data_error_message([&] { strata::read_dataset(path); }),
               StartsWith(path) &&
                   Contains("/test/labels: label 12 at index 5 is not below num_classes 10"));
    // Only the rows actually read are checked.
    CHECK(strata::read_dataset(path, 0, 5).test.count == 5);
  }
  SECTION("num_classes missing or out of range") {
    const std::string missing = dir.file("noclasses.h5");
    write_damaged(missing, good, {.drop_num_classes = true});
    // A missing count is derived from the labels: the largest, 9, plus one.
    CHECK(strata::read_dataset(missing).num_classes == 10);
    Dataset zeros = good;
    std::fill(zeros.train.labels.begin(), zeros.train.labels.end(), 0);
    std::fill(zeros.test.labels.begin(), zeros.test.labels.end(), 0);
    const std::string one_label = dir.file("onelabel.h5");
    write_damaged(one_label, zeros, {.drop_num_classes = true});
    CHECK_THAT(data_error_message([&] { strata::read_dataset(one_label); }),
               StartsWith(one_label) &&
                   Contains("no root attribute num_classes, and the labels hold 1 class(es); a "
                            "classifier needs at least 2"));
    const std::string one = dir.file("oneclass.h5");
    Dataset single = good;
    single.num_classes = 1;
    write_damaged(one, single, {});
    CHECK_THAT(data_error_message([&] { strata::read_dataset(one); }),
               StartsWith(one) && Contains("num_classes is 1, expected a value in [2, 256]"));
  }
  SECTION("images of the wrong rank") {
    const std::string path = dir.file("rank.h5");
    write_damaged(path, good, {.flat_train_images = true});
    CHECK_THAT(data_error_message([&] { strata::read_dataset(path); }),
               StartsWith(path) &&
                   Contains("/train/images has rank 2, expected 3 [N,H,W] or 4 [N,C,H,W]"));
  }
  SECTION("train and test image shapes differ") {
    const std::string path = dir.file("shapes.h5");
    Dataset mixed = good;
    mixed.test = patterned_split(6, 1, 5, 4, 10, 4);
    write_damaged(path, mixed, {});
    CHECK_THAT(
        data_error_message([&] { strata::read_dataset(path); }),
        StartsWith(path) &&
            Contains("/test/images samples are 1x5x4 (CxHxW) but /train/images samples are 1x4x4"));
  }
}

TEST_CASE("make_synthetic is deterministic and shaped by the spec", "[dataset][synthetic]") {
  strata::SyntheticSpec spec;
  spec.train = 64;
  spec.test = 32;
  spec.classes = 4;
  spec.channels = 2;
  spec.height = 5;
  spec.width = 3;

  const Dataset a = strata::make_synthetic(spec, 7);
  CHECK(a.train.count == 64);
  CHECK(a.test.count == 32);
  CHECK(a.train.channels == 2);
  CHECK(a.train.height == 5);
  CHECK(a.train.width == 3);
  CHECK(a.test.channels == 2);
  CHECK(a.train.pixels.size() == std::size_t{64} * 30);
  CHECK(a.test.pixels.size() == std::size_t{32} * 30);
  CHECK(a.train.labels.size() == 64u);
  CHECK(a.num_classes == 4);
  CHECK(a.source == "synthetic");
  for (auto label : a.train.labels) REQUIRE(label < 4);

  CHECK(same_dataset(strata::make_synthetic(spec, 7), a));
  const Dataset b = strata::make_synthetic(spec, 8);
  CHECK(b.train.pixels != a.train.pixels);
  CHECK(b.test.pixels != a.test.pixels);
  // Train and test come from different streams, so test is not a copy of train's first rows.
  CHECK(a.test.pixels !=
        std::vector<std::uint8_t>(a.train.pixels.begin(),
                                  a.train.pixels.begin() + std::ptrdiff_t{32} * 30));

  spec.classes = 1;
  CHECK_THROWS_AS(strata::make_synthetic(spec, 7), strata::ConfigError);

  SECTION("round-trips through the HDF5 layout") {
    TempDir dir;
    const std::string path = dir.file("synthetic.h5");
    strata::write_dataset(path, a);
    CHECK(same_dataset(strata::read_dataset(path), a));
  }
}

TEST_CASE("the default synthetic dataset is separable by class means", "[dataset][synthetic]") {
  // A nearest-class-mean classifier is a weaker learner than an MLP; if it passes 90%, an MLP will.
  const Dataset d = strata::make_synthetic(strata::SyntheticSpec{}, 1);
  const std::int64_t size = d.train.sample_size();
  std::vector<double> means(static_cast<std::size_t>(d.num_classes * size), 0.0);
  std::vector<int> counts(static_cast<std::size_t>(d.num_classes), 0);
  for (std::int64_t i = 0; i < d.train.count; ++i) {
    const int label = d.train.labels[i];
    ++counts[label];
    for (std::int64_t j = 0; j < size; ++j) means[label * size + j] += d.train.pixels[i * size + j];
  }
  for (int c = 0; c < d.num_classes; ++c) {
    REQUIRE(counts[c] > 0);  // labels are spread over all classes
    for (std::int64_t j = 0; j < size; ++j) means[c * size + j] /= counts[c];
  }
  int correct = 0;
  for (std::int64_t i = 0; i < d.test.count; ++i) {
    int best = -1;
    double best_distance = 0.0;
    for (int c = 0; c < d.num_classes; ++c) {
      double distance = 0.0;
      for (std::int64_t j = 0; j < size; ++j) {
        const double diff = d.test.pixels[i * size + j] - means[c * size + j];
        distance += diff * diff;
      }
      if (best < 0 || distance < best_distance) {
        best = c;
        best_distance = distance;
      }
    }
    correct += best == d.test.labels[i] ? 1 : 0;
  }
  CHECK(static_cast<double>(correct) / static_cast<double>(d.test.count) > 0.9);
}

TEST_CASE("import_idx converts Fashion-MNIST", "[idx]") {
  const char* env = std::getenv("STRATA_FASHION_MNIST_DIR");
  const std::string source = env != nullptr ? env : "/usr/share/datasets/fashion-mnist";
  INFO(
      "Fashion-MNIST comes from Debian's dataset-fashion-mnist (jobs/install_deps.sh installs it)");
  REQUIRE(fs::exists(fs::path(source) / "train-images-idx3-ubyte.gz"));
  TempDir dir;
  const std::string path = dir.file("fashion.h5");
  strata::import_idx(source, path);

  const Dataset d = strata::read_dataset(path);
  CHECK(d.train.count == 60000);
  CHECK(d.test.count == 10000);
  CHECK(d.train.channels == 1);
  CHECK(d.train.height == 28);
  CHECK(d.train.width == 28);
  CHECK(d.test.height == 28);
  CHECK(d.num_classes == 10);
  CHECK(d.source == "idx:" + source);
  CHECK(d.train.labels[0] == 9);  // "Ankle boot"
  CHECK(d.test.labels[0] == 9);
  CHECK(strata::h5::File::open_read(path).shape("/train/images") ==
        std::vector<std::int64_t>{60000, 28, 28});
}

TEST_CASE("import_idx converts a small IDX directory and reports damaged files", "[idx]") {
  TempDir dir;
  write_small_idx(dir);
  const std::string out = dir.file("small.h5");

  SECTION("valid files") {
    strata::import_idx(dir.str(), out);
    const Dataset d = strata::read_dataset(out);
    CHECK(d.num_classes == 3);
    CHECK(d.train.count == 4);
    CHECK(d.train.height == 3);
    CHECK(d.train.width == 2);
    CHECK(d.train.labels == std::vector<std::uint8_t>{0, 2, 1, 2});
    CHECK(d.test.labels == std::vector<std::uint8_t>{1, 0});
    CHECK(d.train.pixels[5] == 50);
    CHECK(d.test.pixels[11] == 244);
    CHECK(d.source == "idx:" + dir.str());
  }
  SECTION("missing file") {
    fs::remove(dir.file("t10k-labels-idx1-ubyte.gz"));
    CHECK_THAT(data_error_message([&] { strata::import_idx(dir.str(), out); }),
               Contains("t10k-labels-idx1-ubyte.gz") && Contains("not found"));
  }
  SECTION("not gzip and not IDX") {
    const std::string bad = dir.file("train-labels-idx1-ubyte.gz");
    write_all(bad, {'n', 'o', 't', ' ', 'i', 'd', 'x', ' ', 'a', 't', ' ', 'a', 'l', 'l'});
    CHECK_THAT(data_error_message([&] { strata::import_idx(dir.str(), out); }),
               StartsWith(bad) && Contains("bad IDX magic"));
  }
  SECTION("labels file holding images") {
    const std::string bad = dir.file("train-labels-idx1-ubyte.gz");
    write_idx_gz(bad, 0x803, {4, 1, 1}, {0, 1, 2, 3});
    CHECK_THAT(data_error_message([&] { strata::import_idx(dir.str(), out); }),
               StartsWith(bad) && Contains("bad IDX magic 0x00000803, expected 0x00000801"));
  }
  SECTION("truncated payload") {
    const std::string bad = dir.file("train-images-idx3-ubyte.gz");
    write_idx_gz(bad, 0x803, {4, 3, 2}, std::vector<std::uint8_t>(10, 1));
    CHECK_THAT(data_error_message([&] { strata::import_idx(dir.str(), out); }),
               StartsWith(bad) && Contains("truncated: expected 24 bytes of the pixels, found 10"));
  }
  SECTION("label count differs from image count") {
    write_idx_gz(dir.file("train-labels-idx1-ubyte.gz"), 0x801, {3}, {0, 1, 2});
    CHECK_THAT(data_error_message([&] { strata::import_idx(dir.str(), out); }),
               Contains("train-labels-idx1-ubyte.gz: has 3 labels but") &&
                   Contains("train-images-idx3-ubyte.gz has 4 images"));
  }
  SECTION("corrupted gzip stream") {
    // Enough incompressible-ish data that the flipped bytes land inside the deflate stream.
    const std::string bad = dir.file("train-labels-idx1-ubyte.gz");
    std::vector<std::uint8_t> labels(20000);
    std::minstd_rand noise(3);
    for (auto& l : labels) l = static_cast<std::uint8_t>(noise() % 256);
    write_idx_gz(bad, 0x801, {20000}, labels);
    std::vector<char> bytes = read_all(bad);
    for (std::size_t i = bytes.size() / 2; i < bytes.size() / 2 + 8; ++i)
      bytes[i] = static_cast<char>(~bytes[i]);
    write_all(bad, bytes);
    CHECK_THAT(data_error_message([&] { strata::import_idx(dir.str(), out); }),
               StartsWith(bad) && Contains("corrupt gzip data"));
  }
}

// A Keras-style file: x_train/y_train/x_test/y_test, float32 images in [0, 1], int64 labels and
// no num_classes attribute; it must train on exactly what the uint8 file of the same images gives.
TEST_CASE("data.images and data.labels name the datasets; float32 images; num_classes derived",
          "[dataset][names]") {
  TempDir dir;
  const Dataset ten = ten_class_dataset();
  const std::string bytes = dir.file("bytes.h5"), reals = dir.file("reals.h5");
  strata::write_dataset(bytes, ten);
  {
    auto file = strata::h5::File::create(reals);
    for (const auto* split : {"train", "test"}) {
      const LabeledImages& s = std::string(split) == "train" ? ten.train : ten.test;
      std::vector<float> values(s.pixels.size());
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = s.pixels[i] / 255.0f;
      file.write_f32(fmt::format("x_{}", split), {s.count, s.height, s.width}, values.data());
      file.write_u8(fmt::format("y_{}", split), {s.count}, s.labels.data());
    }
    file.flush();
  }
  strata::DatasetNames keras;
  keras.images = "x_{split}";
  keras.labels = "y_{split}";
  const Dataset read = strata::read_dataset(reals, 0, 0, keras);
  CHECK(read.num_classes == 10);
  CHECK(read.train.real());
  CHECK(read.train.pixels.empty());
  CHECK(read.train.real_pixels.size() == ten.train.pixels.size());
  CHECK(read.test.labels == ten.test.labels);
  // The default names are not in this file: the error names what is missing.
  CHECK_THAT(data_error_message([&] { strata::read_dataset(reals); }),
             Contains("/train/labels is missing"));

  const auto load = [&](const std::string& yaml) {
    return strata::load_training_data(strata::parse_config(yaml, dir.file("c.yaml")));
  };
  const std::string model = "model: {layers: [flatten, {dense: {units: 10}}]}\n";
  for (const char* read_mode : {"memory", "shards"}) {
    const auto from_bytes = load(
        fmt::format("data: {{path: {}, read: {}, validation_fraction: 0.25}}\n", bytes, read_mode) +
        model);
    const auto from_reals =
        load(fmt::format(
                 "data: {{path: {}, read: {}, validation_fraction: 0.25, images: \"x_{{split}}\", "
                 "labels: \"y_{{split}}\"}}\n",
                 reals, read_mode) +
             model);
    CHECK(from_reals.num_classes == 10);
    CHECK(from_reals.mean == Approx(from_bytes.mean).epsilon(1e-6));
    CHECK(from_reals.stddev == Approx(from_bytes.stddev).epsilon(1e-6));
    for (const auto& [a, b] : {std::pair{&from_bytes.validation, &from_reals.validation},
                               std::pair{&from_bytes.test, &from_reals.test}}) {
      REQUIRE(a->images.size() == b->images.size());
      CHECK(a->labels == b->labels);
      for (std::int64_t i = 0; i < a->images.size(); ++i)
        CHECK(b->images.data()[i] == Approx(a->images.data()[i]).margin(1e-5));
    }
    // The training batches too, from memory or read from the file.
    const std::vector<std::int64_t> rows{0, 3, 5};
    strata::Tensor a_images, b_images;
    std::vector<std::int32_t> a_labels, b_labels;
    strata::gather_batch(from_bytes.train, rows, a_images, a_labels);
    strata::gather_batch(from_reals.train, rows, b_images, b_labels);
    CHECK(a_labels == b_labels);
    for (std::int64_t i = 0; i < a_images.size(); ++i)
      CHECK(b_images.data()[i] == Approx(a_images.data()[i]).margin(1e-5));
  }
}

// What HDF5 would convert silently (a label of -1 to class 0, 16-bit pixels above 255 to 255, a NaN
// pixel into every sum) is an error naming the dataset, in memory and shards mode alike.
TEST_CASE("labels out of range, wide integer images and non-finite pixels are refused",
          "[dataset][names]") {
  TempDir dir;
  const Dataset ten = ten_class_dataset();
  auto write = [&](const std::string& path, auto&& images_of, auto&& labels_of) {
    auto file = strata::h5::File::create(path);
    for (const auto* split : {"train", "test"}) {
      const LabeledImages& s = std::string(split) == "train" ? ten.train : ten.test;
      images_of(file, fmt::format("/{}/images", split), s);
      labels_of(file, fmt::format("/{}/labels", split), s);
    }
    file.write_attr_int("/", "num_classes", 10);
    file.flush();
  };
  auto bytes = [](strata::h5::File& f, const std::string& name, const LabeledImages& s) {
    f.write_u8(name, {s.count, s.height, s.width}, s.pixels.data());
  };
  auto reals_with_nan = [](strata::h5::File& f, const std::string& name, const LabeledImages& s) {
    std::vector<float> v(s.pixels.begin(), s.pixels.end());
    for (auto& x : v) x /= 255.0f;
    v[v.size() - 3] = std::nanf("");  // in the last sample: read in every mode
    f.write_f32(name, {s.count, s.height, s.width}, v.data());
  };
  auto labels = [](strata::h5::File& f, const std::string& name, const LabeledImages& s) {
    f.write_u8(name, {s.count}, s.labels.data());
  };
  auto negative_label = [](strata::h5::File& f, const std::string& name, const LabeledImages& s) {
    std::vector<float> wide(s.labels.begin(), s.labels.end());
    wide[1] = -1.0f;
    // An int64 dataset, as Keras-style tools write labels.
    strata::h5::Handle space(
        H5Screate_simple(1, std::vector<hsize_t>{hsize_t(s.count)}.data(), nullptr), H5Sclose);
    strata::h5::Handle set(H5Dcreate2(f.id(), name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT,
                                      H5P_DEFAULT, H5P_DEFAULT),
                           H5Dclose);
    H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide.data());
  };
  const std::string bad_label = dir.file("label.h5"), nan = dir.file("nan.h5");
  write(bad_label, bytes, negative_label);
  write(nan, reals_with_nan, labels);
  CHECK_THAT(data_error_message([&] { strata::read_dataset(bad_label); }),
             Contains("/train/labels: label -1 at index 1 is not a class number in [0, 256)"));
  CHECK_THAT(
      data_error_message([&] { strata::read_dataset(nan); }),
      Contains("/train/images: pixel") && Contains("is nan; images must hold finite values"));
  const std::string model = "model: {layers: [flatten, {dense: {units: 10}}]}\n";
  for (const auto& path : {bad_label, nan}) {
    const strata::Config shards = strata::parse_config(
        fmt::format("data: {{path: {}, read: shards, validation_fraction: 0.25}}\n", path) + model,
        dir.file("c.yaml"));
    CHECK_THROWS_AS(strata::load_training_data(shards), DataError);
  }
  {
    auto file = strata::h5::File::create(dir.file("wide.h5"));
    for (const auto* split : {"train", "test"}) {
      const LabeledImages& s = std::string(split) == "train" ? ten.train : ten.test;
      std::vector<float> v(s.pixels.begin(), s.pixels.end());
      strata::h5::Handle space(
          H5Screate_simple(3, std::vector<hsize_t>{hsize_t(s.count), 4, 4}.data(), nullptr),
          H5Sclose);
      const std::string name = fmt::format("/{}/images", split);
      const strata::h5::Handle group(H5Gcreate2(file.id(), fmt::format("/{}", split).c_str(),
                                                H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                     H5Gclose);
      strata::h5::Handle set(H5Dcreate2(file.id(), name.c_str(), H5T_STD_U16LE, space.get(),
                                        H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                             H5Dclose);
      H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
      file.write_u8(fmt::format("/{}/labels", split), {s.count}, s.labels.data());
    }
    file.flush();
  }
  CHECK_THAT(data_error_message([&] { strata::read_dataset(dir.file("wide.h5")); }),
             Contains("/train/images: images are 2-byte unsigned integers; strata reads uint8"));
}

TEST_CASE("data.images and data.labels must say where the split goes", "[dataset][names][config]") {
  try {
    strata::parse_config("data: {path: d.h5, images: x_train}\nmodel: {layers: [relu]}\n",
                         "t.yaml");
    FAIL("no ConfigError");
  } catch (const strata::ConfigError& e) {
    CHECK(std::string(e.what()) ==
          "t.yaml:1:28: data.images: 'x_train' names one dataset for both splits; write {split} "
          "where train or test goes, e.g. x_{split}");
  }
}
