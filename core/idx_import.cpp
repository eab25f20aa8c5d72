// Fashion-MNIST / MNIST importer: gzipped IDX files to the strata HDF5 layout.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "core/dataset.hpp"
#include "core/errors.hpp"

namespace strata {

namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
// Guards against absurd allocations from a damaged header whose magic happens to be right.
constexpr std::uint32_t kMaxImageEdge = 1 << 16;
constexpr std::uint32_t kMaxCount = 1U << 31;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// One gzipped IDX file, read front to back; every error names the file.
class IdxStream {
 public:
  explicit IdxStream(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path_, ec)) fail("not found");
    file_.reset(gzopen(path_.c_str(), "rb"));
    if (!file_) fail(fmt::format("cannot open ({})", std::strerror(errno)));
    gzbuffer(file_.get(), 1 << 20);  // fewer, larger reads for the 26 MB image file
  }

  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const std::string& problem) const {
    throw DataError(fmt::format("{}: {}", path_, problem));
  }

  std::uint32_t read_u32(const char* what) {
    unsigned char bytes[4];
    read(bytes, sizeof bytes, what);
    return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) |
           (std::uint32_t{bytes[2]} << 8) | std::uint32_t{bytes[3]};
  }

  // Grows `out` while reading so that a header claiming too much data fails as "truncated"
  // instead of first allocating whatever it claims.
  void read_bytes(std::vector<std::uint8_t>& out, std::uint64_t n, const char* what) {
    out.clear();
    while (out.size() < n) {
      const std::size_t chunk =
          static_cast<std::size_t>(std::min<std::uint64_t>(n - out.size(), 1 << 24));
      const std::size_t old_size = out.size();
      out.resize(old_size + chunk);
      read(out.data() + old_size, chunk, what, old_size, n);
    }
  }

  // Reading past the payload makes zlib verify the gzip checksum, which catches corruption that
  // still inflates; trailing bytes mean the header's counts do not describe the file.
  void expect_end() {
    unsigned char extra = 0;
    const int got = gzread(file_.get(), &extra, 1);
    if (got < 0) fail(fmt::format("corrupt gzip data ({})", zlib_error()));
    if (got > 0) fail("has data after the items its header announces");
  }

 private:
  void read(void* out, std::size_t n, const char* what, std::uint64_t done_before = 0,
            std::uint64_t total = 0) {
    auto* bytes = static_cast<unsigned char*>(out);
    std::size_t done = 0;
    while (done < n) {
      const auto request = static_cast<unsigned>(std::min<std::size_t>(n - done, INT_MAX));
      const int got = gzread(file_.get(), bytes + done, request);
      if (got < 0) fail(fmt::format("corrupt gzip data while reading {} ({})", what, zlib_error()));
      if (got == 0) {
        if (total == 0) total = n;
        fail(fmt::format("truncated: expected {} bytes of {}, found {}", total, what,
                         done_before + done));
      }
      done += static_cast<std::size_t>(got);
    }
  }

  std::string zlib_error() const {
    int code = Z_OK;
    const char* message = gzerror(file_.get(), &code);
    return message != nullptr && *message != '\0' ? message : fmt::format("zlib error {}", code);
  }

  std::string path_;
  GzFile file_;
};

void expect_magic(IdxStream& stream, std::uint32_t expected, const char* kind) {
  const std::uint32_t magic = stream.read_u32("the IDX magic number");
  if (magic != expected) {
    stream.fail(
        fmt::format("bad IDX magic 0x{:08x}, expected 0x{:08x} ({})", magic, expected, kind));
  }
}

std::uint32_t read_count(IdxStream& stream, const char* what) {
  const std::uint32_t count = stream.read_u32(what);
  if (count == 0 || count > kMaxCount)
    stream.fail(fmt::format("{} is {}, which is not plausible", what, count));
  return count;
}

LabeledImages read_images(const std::string& path) {
  IdxStream stream(path);
  expect_magic(stream, kImagesMagic, "uint8 3-D images");
  LabeledImages images;
  images.count = read_count(stream, "the image count");
  const std::uint32_t rows = stream.read_u32("the row count");
  const std::uint32_t columns = stream.read_u32("the column count");
  if (rows == 0 || columns == 0 || rows > kMaxImageEdge || columns > kMaxImageEdge) {
    stream.fail(fmt::format("image size {}x{} is not plausible", rows, columns));
  }
  images.channels = 1;
  images.height = static_cast<int>(rows);
  images.width = static_cast<int>(columns);
  stream.read_bytes(images.pixels, static_cast<std::uint64_t>(images.count) * rows * columns,
                    "the pixels");
  stream.expect_end();
  return images;
}

std::vector<std::uint8_t> read_labels(const std::string& path) {
  IdxStream stream(path);
  expect_magic(stream, kLabelsMagic, "uint8 1-D labels");
  const std::uint32_t count = read_count(stream, "the label count");
  std::vector<std::uint8_t> labels;
  stream.read_bytes(labels, count, "the labels");
  stream.expect_end();
  return labels;
}

LabeledImages read_split(const std::filesystem::path& dir, const std::string& prefix) {
  const std::string images_path = (dir / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string labels_path = (dir / (prefix + "-labels-idx1-ubyte.gz")).string();
  LabeledImages split = read_images(images_path);
  split.labels = read_labels(labels_path);
  if (static_cast<std::int64_t>(split.labels.size()) != split.count) {
    throw DataError(fmt::format("{}: has {} labels but {} has {} images", labels_path,
                                split.labels.size(), images_path, split.count));
  }
  return split;
}

std::uint8_t max_label(const LabeledImages& split) {
  return split.labels.empty() ? 0 : *std::max_element(split.labels.begin(), split.labels.end());
}

}  // namespace

void import_idx(const std::string& dir, const std::string& out_path) {
  Dataset dataset;
  dataset.train = read_split(dir, "train");
  dataset.test = read_split(dir, "t10k");
  if (dataset.train.height != dataset.test.height || dataset.train.width != dataset.test.width) {
    throw DataError(fmt::format("{}: training images are {}x{} but test images are {}x{}", dir,
                                dataset.train.height, dataset.train.width, dataset.test.height,
                                dataset.test.width));
  }
  // IDX carries no class count; labels are 0-based, so the largest one seen defines it.
  dataset.num_classes = std::max(max_label(dataset.train), max_label(dataset.test)) + 1;
  if (dataset.num_classes < 2) {
    throw DataError(fmt::format(
        "{}: every label is 0; a classification dataset needs at least two classes", dir));
  }
  dataset.source = "idx:" + dir;
  write_dataset(out_path, dataset);
}

}  // namespace strata
