#include "core/hdf5_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

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

Handle link_creation_list(const File& file, const std::string& object) {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.valid() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) {
    fail_hdf5(file.path(), object, "cannot create a link creation property list");
  }
  return lcpl;
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
  create(path).write_and_close(write);
}

void File::change_unfinished(const std::string& path, const std::function<void(File&)>& change) {
  File file = [&] {
    const std::lock_guard lock(library_mutex());
    silence_hdf5_error_printing();
    Handle id(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    if (!id.valid()) fail_hdf5(path, "file", "cannot open for writing");
    return File(path, std::move(id));
  }();
  file.write_and_close(change);
}

void File::write_and_close(const std::function<void(File&)>& write) {
  try {
    write(*this);
    flush();
  } catch (...) {
    const std::lock_guard lock(library_mutex());
    void* handle = nullptr;
    if (H5Fget_vfd_handle(id(), H5P_DEFAULT, &handle) >= 0 && handle != nullptr)
      if (::ftruncate(*static_cast<int*>(handle), 0) != 0) {
        // Nothing more to do: the close below may fail, and the error in flight says why.
      }
    file_.reset();
    throw;
  }
  // One lock over the close and the error's description, which reads HDF5's error stack.
  const std::lock_guard lock(library_mutex());
  if (file_.close() < 0) fail_hdf5(path_, "file", "cannot close (disk full?)");
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
