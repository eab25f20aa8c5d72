#include "core/hdf5_file.hpp"

#include <cstdint>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/hdf5_internal.hpp"

namespace strata::h5 {

namespace {

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

// A new dataset of `shape`, its elements `element_count` on return; `creation` is its dataset
// creation property list (H5P_DEFAULT: contiguous, allocated when first written).
Handle create_dataset(File& file, const std::string& name, const std::vector<std::int64_t>& shape,
                      hid_t file_type, hid_t creation, hsize_t& element_count) {
  const std::string what = "dataset " + name;
  if (file.exists(name)) fail(file.path(), what, "already exists");
  std::vector<hsize_t> dims;
  element_count = 1;
  for (const auto d : shape) {
    if (d < 0) fail(file.path(), what, fmt::format("negative dimension in shape {}", shape));
    dims.push_back(static_cast<hsize_t>(d));
    element_count *= static_cast<hsize_t>(d);
  }
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  if (!space.valid())
    fail_hdf5(file.path(), what, fmt::format("cannot create a dataspace of shape {}", shape));
  Handle lcpl = link_creation_list(file, name);
  Handle dataset(H5Dcreate2(file.id(), name.c_str(), file_type, space.get(), lcpl.get(), creation,
                            H5P_DEFAULT),
                 H5Dclose);
  if (!dataset.valid()) fail_hdf5(file.path(), what, "cannot create");
  return dataset;
}

template <typename T>
void write_array(File& file, const std::string& name, const std::vector<std::int64_t>& shape,
                 hid_t memory_type, hid_t file_type, const T* values) {
  hsize_t elements = 0;
  Handle dataset = create_dataset(file, name, shape, file_type, H5P_DEFAULT, elements);
  if (elements > 0 && values == nullptr) {
    throw std::invalid_argument(
        fmt::format("{}: dataset {}: no values given for shape {}", file.path(), name, shape));
  }
  if (elements > 0 &&
      H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) {
    fail_hdf5(file.path(), "dataset " + name, "cannot write (disk full?)");
  }
}

enum class Accept { integers, numbers };

// Rows [first, first + count) along `axis` (every index of the other axes).
template <typename T>
void read_rows(const File& file, const std::string& name, hid_t memory_type, Accept accept,
               std::vector<T>& out, std::int64_t first, std::int64_t count, std::size_t axis = 0) {
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

  if (axis >= dims.size())
    fail(file.path(), what,
         fmt::format("has {} axes; cannot read along axis {}", dims.size(), axis));
  const auto rows = static_cast<std::int64_t>(dims[axis]);
  if (first < 0 || first > rows) {
    fail(file.path(), what, fmt::format("first row {} is out of range for {} rows", first, rows));
  }
  if (count < 0) count = rows - first;
  if (count > rows - first) {
    fail(file.path(), what,
         fmt::format("rows [{}, {}) are out of range for {} rows", first, first + count, rows));
  }

  hsize_t row_elements = 1;
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (i != axis) row_elements *= dims[i];
  out.resize(static_cast<std::size_t>(static_cast<hsize_t>(count) * row_elements));
  if (out.empty()) return;

  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> block = dims;
  start[axis] = static_cast<hsize_t>(first);
  block[axis] = static_cast<hsize_t>(count);
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

std::uint64_t File::reserve_f32(const std::string& dataset,
                                const std::vector<std::int64_t>& shape) {
  const std::lock_guard lock(library_mutex());
  const std::string what = "dataset " + dataset;
  // Contiguous and allocated now, so that its data has one offset; never filled, so that the
  // library writes none of it.
  Handle creation(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!creation.valid() || H5Pset_layout(creation.get(), H5D_CONTIGUOUS) < 0 ||
      H5Pset_alloc_time(creation.get(), H5D_ALLOC_TIME_EARLY) < 0 ||
      H5Pset_fill_time(creation.get(), H5D_FILL_TIME_NEVER) < 0)
    fail_hdf5(path_, what, "cannot make its creation property list");
  hsize_t elements = 0;
  Handle created = create_dataset(*this, dataset, shape, H5T_IEEE_F32LE, creation.get(), elements);
  if (elements == 0) return 0;
  const haddr_t offset = H5Dget_offset(created.get());
  if (offset == HADDR_UNDEF) fail_hdf5(path_, what, "has no place in the file (disk full?)");
  return offset;
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

void File::read_f32_slice(const std::string& dataset, std::size_t axis, std::int64_t first,
                          std::int64_t count, std::vector<float>& out) const {
  const std::lock_guard lock(library_mutex());
  read_rows(*this, dataset, H5T_NATIVE_FLOAT, Accept::numbers, out, first, count, axis);
}

}  // namespace strata::h5
