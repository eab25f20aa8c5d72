#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/hdf5_file.hpp"
#include "core/hdf5_internal.hpp"

namespace strata::h5 {

namespace {

Handle open_attribute(const File& file, const std::string& object, const std::string& name) {
  Handle owner = open_object(file, object);
  const std::string what = fmt::format("attribute {} of {}", name, object);
  const htri_t present = H5Aexists(owner.get(), name.c_str());
  if (present < 0) fail_hdf5(file.path(), what, "cannot look up");
  if (present == 0) fail(file.path(), what, "not found");
  Handle attribute(H5Aopen(owner.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!attribute.valid()) fail_hdf5(file.path(), what, "cannot open");
  return attribute;
}

// Attributes strata reads hold one value: a scalar, or h5py's occasional shape-(1,) array.
void require_single_value(const File& file, const std::string& what, hid_t attribute) {
  Handle space(H5Aget_space(attribute), H5Sclose);
  if (!space.valid()) fail_hdf5(file.path(), what, "cannot read its dataspace");
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n != 1) fail(file.path(), what, fmt::format("holds {} values, expected exactly one", n));
}

// `name` on `object`, open, to write one value of `file_type` into: an attribute of that name,
// type and one value is reused, written in place (no new space in the file: a checkpoint's
// checksums are recorded after its data); one of another type or shape is replaced.
Handle attribute_to_write(const File& file, const std::string& object, const std::string& name,
                          hid_t file_type) {
  Handle owner = open_object(file, object);
  const std::string what = fmt::format("attribute {} of {}", name, object);
  const htri_t present = H5Aexists(owner.get(), name.c_str());
  if (present < 0) fail_hdf5(file.path(), what, "cannot look up");
  if (present > 0) {
    Handle existing(H5Aopen(owner.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
    if (!existing.valid()) fail_hdf5(file.path(), what, "cannot open");
    Handle type(H5Aget_type(existing.get()), H5Tclose);
    Handle space(H5Aget_space(existing.get()), H5Sclose);
    if (type.valid() && space.valid() && H5Tequal(type.get(), file_type) > 0 &&
        H5Sget_simple_extent_npoints(space.get()) == 1)
      return existing;
    existing.reset();
    if (H5Adelete(owner.get(), name.c_str()) < 0) fail_hdf5(file.path(), what, "cannot replace");
  }
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attribute(
      H5Acreate2(owner.get(), name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  if (!space.valid() || !attribute.valid()) fail_hdf5(file.path(), what, "cannot create");
  return attribute;
}

std::string read_variable_string(const File& file, const std::string& what, hid_t attribute,
                                 hid_t file_type) {
  Handle memory_type(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!memory_type.valid() || H5Tset_size(memory_type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(memory_type.get(), H5Tget_cset(file_type)) < 0) {
    fail_hdf5(file.path(), what, "cannot build a string memory type");
  }
  char* raw = nullptr;
  if (H5Aread(attribute, memory_type.get(), &raw) < 0) fail_hdf5(file.path(), what, "cannot read");
  // HDF5 allocated the string; it must go back through HDF5's allocator.
  const std::unique_ptr<char, herr_t (*)(void*)> owned(raw, H5free_memory);
  return raw == nullptr ? std::string() : std::string(raw);
}

std::string read_fixed_string(const File& file, const std::string& what, hid_t attribute,
                              hid_t file_type) {
  const std::size_t size = H5Tget_size(file_type);
  if (size == 0) fail_hdf5(file.path(), what, "cannot read its string size");
  // Reading with the file's own type copies the bytes unchanged; padding is handled below.
  std::string value(size, '\0');
  if (H5Aread(attribute, file_type, value.data()) < 0) fail_hdf5(file.path(), what, "cannot read");
  const std::size_t nul = value.find('\0');
  if (nul != std::string::npos) value.resize(nul);
  if (H5Tget_strpad(file_type) == H5T_STR_SPACEPAD) {
    value.erase(value.find_last_not_of(' ') + 1);
  }
  return value;
}

}  // namespace

void File::write_attr_int(const std::string& object, const std::string& name, std::int64_t value) {
  const std::lock_guard lock(library_mutex());
  Handle attribute = attribute_to_write(*this, object, name, H5T_STD_I64LE);
  if (H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value) < 0) {
    fail_hdf5(path_, fmt::format("attribute {} of {}", name, object), "cannot write");
  }
}

void File::write_attr_string(const std::string& object, const std::string& name,
                             const std::string& value) {
  const std::lock_guard lock(library_mutex());
  const std::string what = fmt::format("attribute {} of {}", name, object);
  // Variable-length UTF-8, as h5py writes str attributes, so Python readers get str rather than
  // bytes.
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!type.valid() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0) {
    fail_hdf5(path_, what, "cannot build a string type");
  }
  Handle attribute = attribute_to_write(*this, object, name, type.get());
  const char* text = value.c_str();
  if (H5Awrite(attribute.get(), type.get(), &text) < 0) fail_hdf5(path_, what, "cannot write");
}

bool File::has_attr(const std::string& object, const std::string& name) const {
  const std::lock_guard lock(library_mutex());
  if (!exists(object)) return false;
  Handle owner = open_object(*this, object);
  const htri_t present = H5Aexists(owner.get(), name.c_str());
  if (present < 0)
    fail_hdf5(path_, fmt::format("attribute {} of {}", name, object), "cannot look up");
  return present > 0;
}

std::int64_t File::read_attr_int(const std::string& object, const std::string& name) const {
  const std::lock_guard lock(library_mutex());
  const std::string what = fmt::format("attribute {} of {}", name, object);
  Handle attribute = open_attribute(*this, object, name);
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (!type.valid()) fail_hdf5(path_, what, "cannot read its type");
  if (H5Tget_class(type.get()) != H5T_INTEGER) fail(path_, what, "is not an integer");
  require_single_value(*this, what, attribute.get());
  std::int64_t value = 0;
  if (H5Aread(attribute.get(), H5T_NATIVE_INT64, &value) < 0) fail_hdf5(path_, what, "cannot read");
  return value;
}

std::string File::read_attr_string(const std::string& object, const std::string& name) const {
  const std::lock_guard lock(library_mutex());
  const std::string what = fmt::format("attribute {} of {}", name, object);
  Handle attribute = open_attribute(*this, object, name);
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (!type.valid()) fail_hdf5(path_, what, "cannot read its type");
  if (H5Tget_class(type.get()) != H5T_STRING) fail(path_, what, "is not a string");
  require_single_value(*this, what, attribute.get());
  const htri_t variable = H5Tis_variable_str(type.get());
  if (variable < 0) fail_hdf5(path_, what, "cannot read its string type");
  return variable > 0 ? read_variable_string(*this, what, attribute.get(), type.get())
                      : read_fixed_string(*this, what, attribute.get(), type.get());
}

void File::write_attr_real(const std::string& object, const std::string& name, double value) {
  const std::lock_guard lock(library_mutex());
  Handle attribute = attribute_to_write(*this, object, name, H5T_IEEE_F64LE);
  if (H5Awrite(attribute.get(), H5T_NATIVE_DOUBLE, &value) < 0)
    fail_hdf5(path_, fmt::format("attribute {} of {}", name, object), "cannot write");
}

double File::read_attr_real(const std::string& object, const std::string& name) const {
  const std::lock_guard lock(library_mutex());
  const std::string what = fmt::format("attribute {} of {}", name, object);
  Handle attribute = open_attribute(*this, object, name);
  require_single_value(*this, what, attribute.get());
  double value = 0.0;
  if (H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value) < 0)
    fail_hdf5(path_, what, "cannot read");
  return value;
}

std::vector<std::pair<std::string, H5T_class_t>> File::attributes(const std::string& object) const {
  const std::lock_guard lock(library_mutex());
  Handle owner = open_object(*this, object);
  std::vector<std::pair<std::string, H5T_class_t>> out;
  auto collect = [](hid_t location, const char* name, const H5A_info_t*, void* data) -> herr_t {
    Handle attribute(H5Aopen(location, name, H5P_DEFAULT), H5Aclose);
    Handle type(attribute.valid() ? H5Aget_type(attribute.get()) : -1, H5Tclose);
    if (!type.valid()) return -1;
    static_cast<std::vector<std::pair<std::string, H5T_class_t>>*>(data)->emplace_back(
        name, H5Tget_class(type.get()));
    return 0;
  };
  if (H5Aiterate2(owner.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &out) < 0)
    fail_hdf5(path_, "object " + object, "cannot list its attributes (damaged file?)");
  return out;
}

}  // namespace strata::h5
