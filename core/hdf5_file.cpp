#include "core/hdf5_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/hdf5_internal.hpp"

namespace strata::h5 {

std::recursive_mutex& library_mutex() {
  // The HDF5 library of a parallel build is not thread-safe, and a checkpoint is written by a
  // background thread while training may read its data file: every call strata makes into the
  // library holds this lock, so calls from different threads never overlap.
  static std::recursive_mutex mutex;
  return mutex;
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    closer_ = other.closer_;
    other.id_ = -1;
  }
  return *this;
}

herr_t Handle::close() {
  const std::lock_guard lock(library_mutex());
  const herr_t status = id_ >= 0 && closer_ != nullptr ? closer_(id_) : 0;
  id_ = -1;
  return status;
}

void Handle::reset() {
  const std::lock_guard lock(library_mutex());
  if (id_ >= 0 && closer_ != nullptr) closer_(id_);
  id_ = -1;
}

namespace {

// HDF5 prints its whole error stack to stderr on every failed call by default; strata reports
// failures through DataError instead, so the printing is switched off before the first call.
void silence_hdf5_error_printing() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

// The innermost message on HDF5's error stack (e.g. "truncated file: eof = 1024, ..."), which is
// usually the one that tells a user what is actually wrong. Must be called right after the failure.
std::string hdf5_error_detail() {
  std::string detail;
  auto take_innermost = [](unsigned n, const H5E_error2_t* err, void* out) -> herr_t {
    if (n == 0 && err != nullptr && err->desc != nullptr)
      *static_cast<std::string*>(out) = err->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, take_innermost, &detail);
  // HDF5's descriptions may hold newlines (a write failure's time stamp): keep messages one line.
  std::replace(detail.begin(), detail.end(), '\n', ' ');
  return detail;
}

std::vector<std::string> split_path(const std::string& object) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= object.size()) {
    std::size_t end = object.find('/', start);
    if (end == std::string::npos) end = object.size();
    if (end > start) parts.push_back(object.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// Lets "/a/b/c" be created in one call, as if by mkdir -p.
Handle link_creation_list(const File& file, const std::string& object) {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.valid() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) {
    fail_hdf5(file.path(), object, "cannot create a link creation property list");
  }
  return lcpl;
}

Handle open_dataset(const File& file, const std::string& name) {
  if (!file.exists(name)) fail(file.path(), "dataset " + name, "not found");
  Handle dataset(H5Dopen2(file.id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) fail_hdf5(file.path(), "dataset " + name, "cannot open as a dataset");
  return dataset;
}

std::vector<hsize_t> extent(const File& file, const std::string& what, hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0) fail_hdf5(file.path(), what, "cannot read its dataspace");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space, dims.data(), nullptr) < 0) {
    fail_hdf5(file.path(), what, "cannot read its dimensions");
  }
  return dims;
}

template <typename T>
void write_array(File& file, const std::string& name, const std::vector<std::int64_t>& shape,
                 hid_t memory_type, hid_t file_type, const T* values) {
  const std::string what = "dataset " + name;
  if (file.exists(name)) fail(file.path(), what, "already exists");
  std::vector<hsize_t> dims;
  hsize_t elements = 1;
  for (const auto d : shape) {
    if (d < 0) fail(file.path(), what, fmt::format("negative dimension in shape {}", shape));
    dims.push_back(static_cast<hsize_t>(d));
    elements *= static_cast<hsize_t>(d);
  }
  if (elements > 0 && values == nullptr) {
    throw std::invalid_argument(
        fmt::format("{}: {}: no values given for shape {}", file.path(), what, shape));
  }
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  if (!space.valid())
    fail_hdf5(file.path(), what, fmt::format("cannot create a dataspace of shape {}", shape));
  Handle lcpl = link_creation_list(file, name);
  Handle dataset(H5Dcreate2(file.id(), name.c_str(), file_type, space.get(), lcpl.get(),
                            H5P_DEFAULT, H5P_DEFAULT),
                 H5Dclose);
  if (!dataset.valid()) fail_hdf5(file.path(), what, "cannot create");
  if (elements > 0 &&
      H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) {
    fail_hdf5(file.path(), what, "cannot write (disk full?)");
  }
}

enum class Accept { integers, numbers };

template <typename T>
void read_rows(const File& file, const std::string& name, hid_t memory_type, Accept accept,
               std::vector<T>& out, std::int64_t first, std::int64_t count) {
  const std::string what = "dataset " + name;
  Handle dataset = open_dataset(file, name);

  // HDF5 would silently saturate e.g. float pixels in [0,1] into uint8 zeros and ones.
  Handle type(H5Dget_type(dataset.get()), H5Tclose);
  if (!type.valid()) fail_hdf5(file.path(), what, "cannot read its element type");
  const H5T_class_t type_class = H5Tget_class(type.get());
  const bool ok =
      type_class == H5T_INTEGER || (accept == Accept::numbers && type_class == H5T_FLOAT);
  if (!ok) {
    fail(file.path(), what,
         accept == Accept::integers ? "element type is not an integer type"
                                    : "element type is not numeric");
  }

  Handle file_space(H5Dget_space(dataset.get()), H5Sclose);
  if (!file_space.valid()) fail_hdf5(file.path(), what, "cannot read its dataspace");
  std::vector<hsize_t> dims = extent(file, what, file_space.get());
  if (dims.empty()) {
    // A scalar has no rows to select; only a whole read makes sense.
    if (first != 0 || count > 1) fail(file.path(), what, "is a scalar; cannot read rows of it");
    dims.push_back(1);
  }

  const auto rows = static_cast<std::int64_t>(dims[0]);
  if (first < 0 || first > rows) {
    fail(file.path(), what, fmt::format("first row {} is out of range for {} rows", first, rows));
  }
  if (count < 0) count = rows - first;
  if (count > rows - first) {
    fail(file.path(), what,
         fmt::format("rows [{}, {}) are out of range for {} rows", first, first + count, rows));
  }

  hsize_t row_elements = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) row_elements *= dims[i];
  out.resize(static_cast<std::size_t>(static_cast<hsize_t>(count) * row_elements));
  if (out.empty()) return;

  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> block = dims;
  start[0] = static_cast<hsize_t>(first);
  block[0] = static_cast<hsize_t>(count);
  if (H5Sget_simple_extent_ndims(file_space.get()) > 0 &&
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, block.data(),
                          nullptr) < 0) {
    fail_hdf5(file.path(), what, "cannot select rows");
  }
  Handle memory_space(H5Screate_simple(static_cast<int>(block.size()), block.data(), nullptr),
                      H5Sclose);
  if (!memory_space.valid()) fail_hdf5(file.path(), what, "cannot create a memory dataspace");
  if (H5Dread(dataset.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT,
              out.data()) < 0) {
    fail_hdf5(file.path(), what,
              fmt::format("cannot read rows [{}, {}) (damaged file?)", first, first + count));
  }
}

}  // namespace

[[noreturn]] void fail(const std::string& path, const std::string& object,
                       const std::string& problem) {
  throw DataError(fmt::format("{}: {}: {}", path, object, problem));
}

[[noreturn]] void fail_hdf5(const std::string& path, const std::string& object,
                            const std::string& problem) {
  const std::string detail = hdf5_error_detail();
  if (detail.empty()) fail(path, object, problem);
  fail(path, object, fmt::format("{} ({})", problem, detail));
}

Handle open_object(const File& file, const std::string& name) {
  if (!file.exists(name)) fail(file.path(), "object " + name, "not found");
  Handle object(H5Oopen(file.id(), name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!object.valid()) fail_hdf5(file.path(), "object " + name, "cannot open");
  return object;
}

File File::create(const std::string& path) {
  const std::lock_guard lock(library_mutex());
  silence_hdf5_error_printing();
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) {
    const std::string detail = hdf5_error_detail();
    throw DataError(
        fmt::format("{}: cannot create HDF5 file: {}", path,
                    detail.empty() ? "does the directory exist and is it writable?" : detail));
  }
  return File(path, std::move(file));
}

void File::write_new(const std::string& path, const std::function<void(File&)>& write) {
  File file = create(path);
  try {
    write(file);
    file.flush();
  } catch (...) {
    const std::lock_guard lock(library_mutex());
    void* handle = nullptr;
    if (H5Fget_vfd_handle(file.id(), H5P_DEFAULT, &handle) >= 0 && handle != nullptr)
      if (::ftruncate(*static_cast<int*>(handle), 0) != 0) {
        // Nothing more to do: the close below may fail, and the error in flight says why.
      }
    file.file_.reset();
    throw;
  }
  if (file.file_.close() < 0) fail_hdf5(path, "file", "cannot close (disk full?)");
}

File File::open_read(const std::string& path) {
  const std::lock_guard lock(library_mutex());
  silence_hdf5_error_printing();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw DataError(fmt::format("{}: file not found", path));
  // Telling "not HDF5 at all" from "HDF5 but damaged" saves the user a guess.
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    throw DataError(fmt::format("{}: not an HDF5 file (cannot open)", path));
  }
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) {
    const std::string detail = hdf5_error_detail();
    throw DataError(fmt::format("{}: HDF5 file is truncated or damaged (cannot open){}", path,
                                detail.empty() ? "" : ": " + detail));
  }
  return File(path, std::move(file));
}

bool File::exists(const std::string& object) const {
  const std::lock_guard lock(library_mutex());
  // H5Lexists fails rather than answering "no" when a parent is missing, so walk down from the
  // root.
  std::string prefix;
  const std::vector<std::string> parts = split_path(object);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    prefix += "/" + parts[i];
    const htri_t present = H5Lexists(id(), prefix.c_str(), H5P_DEFAULT);
    if (present < 0) fail_hdf5(path_, prefix, "cannot look up (damaged file?)");
    if (present == 0) return false;
    if (i + 1 < parts.size()) {
      Handle parent(H5Oopen(id(), prefix.c_str(), H5P_DEFAULT), H5Oclose);
      if (!parent.valid()) fail_hdf5(path_, prefix, "cannot open");
      if (H5Iget_type(parent.get()) != H5I_GROUP) return false;  // e.g. "/dataset/child"
    }
  }
  return true;
}

void File::create_group(const std::string& group) {
  const std::lock_guard lock(library_mutex());
  if (exists(group)) return;
  Handle lcpl = link_creation_list(*this, group);
  Handle created(H5Gcreate2(id(), group.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!created.valid()) fail_hdf5(path_, "group " + group, "cannot create");
}

std::vector<std::int64_t> File::shape(const std::string& dataset) const {
  const std::lock_guard lock(library_mutex());
  Handle opened = open_dataset(*this, dataset);
  Handle space(H5Dget_space(opened.get()), H5Sclose);
  if (!space.valid()) fail_hdf5(path_, "dataset " + dataset, "cannot read its dataspace");
  const std::vector<hsize_t> dims = extent(*this, "dataset " + dataset, space.get());
  return {dims.begin(), dims.end()};
}

void File::write_u8(const std::string& dataset, const std::vector<std::int64_t>& shape,
                    const std::uint8_t* values) {
  const std::lock_guard lock(library_mutex());
  write_array(*this, dataset, shape, H5T_NATIVE_UINT8, H5T_STD_U8LE, values);
}

void File::write_f32(const std::string& dataset, const std::vector<std::int64_t>& shape,
                     const float* values) {
  const std::lock_guard lock(library_mutex());
  write_array(*this, dataset, shape, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, values);
}

void File::read_u8(const std::string& dataset, std::vector<std::uint8_t>& out, std::int64_t first,
                   std::int64_t count) const {
  const std::lock_guard lock(library_mutex());
  read_rows(*this, dataset, H5T_NATIVE_UINT8, Accept::integers, out, first, count);
}

namespace {

template <typename T>
void read_row_union(const File& file, const std::string& name, hid_t memory_type,
                    std::span<const std::int64_t> rows, std::vector<T>& out) {
  const std::lock_guard lock(library_mutex());
  const std::string what = "dataset " + name;
  Handle dataset = open_dataset(file, name);
  Handle file_space(H5Dget_space(dataset.get()), H5Sclose);
  if (!file_space.valid()) fail_hdf5(file.path(), what, "cannot read its dataspace");
  const std::vector<hsize_t> dims = extent(file, what, file_space.get());
  if (dims.empty()) fail(file.path(), what, "is a scalar; cannot read rows of it");
  hsize_t row_elements = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) row_elements *= dims[i];
  out.resize(rows.size() * row_elements);
  if (rows.empty()) return;
  // Consecutive rows become one block, so a sorted shard costs as few selections as it can.
  H5Sselect_none(file_space.get());
  std::vector<hsize_t> start(dims.size(), 0), block = dims;
  for (std::size_t i = 0; i < rows.size();) {
    std::size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    if (rows[i] < 0 || rows[j - 1] >= static_cast<std::int64_t>(dims[0]) ||
        (i > 0 && rows[i] <= rows[i - 1]))
      fail(file.path(), what,
           fmt::format("row {} is out of range for {} rows, or the rows are not ascending", rows[i],
                       dims[0]));
    start[0] = static_cast<hsize_t>(rows[i]);
    block[0] = static_cast<hsize_t>(j - i);
    if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_OR, start.data(), nullptr, block.data(),
                            nullptr) < 0)
      fail_hdf5(file.path(), what, "cannot select rows");
    i = j;
  }
  std::vector<hsize_t> memory_dims = dims;
  memory_dims[0] = rows.size();
  Handle memory_space(
      H5Screate_simple(static_cast<int>(memory_dims.size()), memory_dims.data(), nullptr),
      H5Sclose);
  if (!memory_space.valid()) fail_hdf5(file.path(), what, "cannot create a memory dataspace");
  if (H5Dread(dataset.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT,
              out.data()) < 0)
    fail_hdf5(file.path(), what, fmt::format("cannot read {} rows (damaged file?)", rows.size()));
}

}  // namespace

void File::read_u8_rows(const std::string& name, std::span<const std::int64_t> rows,
                        std::vector<std::uint8_t>& out) const {
  read_row_union(*this, name, H5T_NATIVE_UINT8, rows, out);
}

void File::read_f32_rows(const std::string& name, std::span<const std::int64_t> rows,
                         std::vector<float>& out) const {
  read_row_union(*this, name, H5T_NATIVE_FLOAT, rows, out);
}

File::ElementType File::element_type(const std::string& name) const {
  const std::lock_guard lock(library_mutex());
  Handle dataset = open_dataset(*this, name);
  Handle type(H5Dget_type(dataset.get()), H5Tclose);
  if (!type.valid()) fail_hdf5(path(), "dataset " + name, "cannot read its element type");
  ElementType t;
  t.kind = H5Tget_class(type.get());
  t.bytes = H5Tget_size(type.get());
  t.is_signed = t.kind == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_2;
  return t;
}

void File::read_i64(const std::string& dataset, std::vector<std::int64_t>& out, std::int64_t first,
                    std::int64_t count) const {
  const std::lock_guard lock(library_mutex());
  read_rows(*this, dataset, H5T_NATIVE_INT64, Accept::integers, out, first, count);
}

void File::read_f32(const std::string& dataset, std::vector<float>& out, std::int64_t first,
                    std::int64_t count) const {
  const std::lock_guard lock(library_mutex());
  read_rows(*this, dataset, H5T_NATIVE_FLOAT, Accept::numbers, out, first, count);
}

namespace {

struct Listing {
  std::vector<std::string> datasets, groups;
};

herr_t list_object(hid_t /*root*/, const char* name, const H5O_info_t* info, void* out) {
  auto& listing = *static_cast<Listing*>(out);
  if (std::string(name) == ".") return 0;
  if (info->type == H5O_TYPE_DATASET) listing.datasets.push_back(std::string("/") + name);
  if (info->type == H5O_TYPE_GROUP) listing.groups.push_back(std::string("/") + name);
  return 0;
}

Listing list_objects(const File& file) {
  Listing listing;
  if (H5Ovisit(file.id(), H5_INDEX_NAME, H5_ITER_INC, list_object, &listing) < 0)
    fail_hdf5(file.path(), "file", "cannot list its objects (damaged file?)");
  return listing;
}

}  // namespace

std::vector<std::string> File::datasets() const {
  const std::lock_guard lock(library_mutex());
  return list_objects(*this).datasets;
}

std::vector<std::string> File::groups() const {
  const std::lock_guard lock(library_mutex());
  return list_objects(*this).groups;
}

void File::flush() {
  const std::lock_guard lock(library_mutex());
  if (H5Fflush(id(), H5F_SCOPE_LOCAL) < 0) fail_hdf5(path_, "file", "cannot flush (disk full?)");
}

}  // namespace strata::h5
