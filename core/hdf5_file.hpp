// RAII wrappers over the HDF5 C API and the few typed reads and writes strata needs.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace strata::h5 {

// Held by every call into the HDF5 library (it is not thread-safe): a background checkpoint write
// and the training thread's data reads take turns, one library call at a time.
std::recursive_mutex& library_mutex();

// Owns one HDF5 identifier and closes it with the matching H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();
  // Closes now and returns what the closer returned (reset() ignores it).
  herr_t close();

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

// An open HDF5 file. All failures throw DataError naming the file and the object.
class File {
 public:
  static File create(const std::string& path);  // truncates
  // Creates `path`, runs `write` on it, flushes and closes it. When anything fails (a full disk),
  // the file is emptied before HDF5 closes it, so that the close has room for what it still
  // writes: HDF5 1.10 otherwise keeps a file whose close failed and crashes at exit closing it.
  static void write_new(const std::string& path, const std::function<void(File&)>& write);
  // Opens `path`, a file not yet committed (a temporary one), for writing, runs `change` on it,
  // flushes and closes it. When `change` or the flush fails it is emptied like write_new's; when
  // it cannot be opened it is left as it is. Either way the caller removes it.
  static void change_unfinished(const std::string& path, const std::function<void(File&)>& change);
  static File open_read(const std::string& path);

  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }
  bool exists(const std::string& object) const;
  void create_group(const std::string& group);

  // Dimensions of a dataset.
  std::vector<std::int64_t> shape(const std::string& dataset) const;

  void write_u8(const std::string& dataset, const std::vector<std::int64_t>& shape,
                const std::uint8_t* values);
  void write_f32(const std::string& dataset, const std::vector<std::int64_t>& shape,
                 const float* values);
  // Creates a float32 dataset of `shape` whose storage is allocated in the file but left unwritten
  // (contiguous, never filled) and returns the byte offset of its data, row-major and
  // little-endian: for other processes to write once the file is closed (FileParts). 0 when it
  // has no elements.
  std::uint64_t reserve_f32(const std::string& dataset, const std::vector<std::int64_t>& shape);
  // Reads rows [first, first+count) along the first axis (count < 0: to the end) into `out`,
  // which is resized. The dataset's type is converted by HDF5.
  void read_u8(const std::string& dataset, std::vector<std::uint8_t>& out, std::int64_t first = 0,
               std::int64_t count = -1) const;
  void read_f32(const std::string& dataset, std::vector<float>& out, std::int64_t first = 0,
                std::int64_t count = -1) const;
  // Reads [first, first+count) along `axis` and every index of the other axes (a model-parallel
  // shard's slice), row-major into `out`, which is resized.
  void read_f32_slice(const std::string& dataset, std::size_t axis, std::int64_t first,
                      std::int64_t count, std::vector<float>& out) const;
  // Reads the listed rows (ascending, no repeats) along the first axis in one read of a union of
  // hyperslabs, back to back into `out`, which is resized.
  void read_u8_rows(const std::string& dataset, std::span<const std::int64_t> rows,
                    std::vector<std::uint8_t>& out) const;
  void read_f32_rows(const std::string& dataset, std::span<const std::int64_t> rows,
                     std::vector<float>& out) const;
  // What a dataset's elements are: H5T_INTEGER, H5T_FLOAT, ..., their size and sign.
  struct ElementType {
    H5T_class_t kind = H5T_NO_CLASS;
    std::size_t bytes = 0;
    bool is_signed = false;
  };
  ElementType element_type(const std::string& dataset) const;
  // Integers of any width as int64 (no clipping, unlike read_u8).
  void read_i64(const std::string& dataset, std::vector<std::int64_t>& out, std::int64_t first = 0,
                std::int64_t count = -1) const;

  void write_attr_int(const std::string& object, const std::string& name, std::int64_t value);
  void write_attr_string(const std::string& object, const std::string& name,
                         const std::string& value);
  void write_attr_real(const std::string& object, const std::string& name, double value);
  double read_attr_real(const std::string& object, const std::string& name) const;
  bool has_attr(const std::string& object, const std::string& name) const;
  std::int64_t read_attr_int(const std::string& object, const std::string& name) const;
  std::string read_attr_string(const std::string& object, const std::string& name) const;

  void flush();

  // Every dataset and every group below the root, as absolute paths ("/weights/dense_1/bias").
  std::vector<std::string> datasets() const;
  std::vector<std::string> groups() const;
  // The attributes of `object` with the class of each (H5T_INTEGER, H5T_FLOAT, H5T_STRING, ...).
  std::vector<std::pair<std::string, H5T_class_t>> attributes(const std::string& object) const;

 private:
  File(std::string path, Handle file) : path_(std::move(path)), file_(std::move(file)) {}
  // Runs `write` on this file, flushes and closes it, emptying it first when anything fails.
  void write_and_close(const std::function<void(File&)>& write);
  std::string path_;
  Handle file_;
};

}  // namespace strata::h5
