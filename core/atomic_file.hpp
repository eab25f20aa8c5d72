// Files that are never seen half-written: written under a temporary name, synced, then renamed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

namespace strata {

// Writes `bytes` to `path` + ".tmp", fsyncs it, renames it to `path` and fsyncs the directory, so
// that a crash or a full disk leaves either the old file or the new one, never a part. Throws
// DataError naming the file and the reason (e.g. "No space left on device"); the temporary file is
// removed on failure.
void write_file_atomically(const std::filesystem::path& path, std::span<const char> bytes);
void write_text_atomically(const std::filesystem::path& path, const std::string& text);
// The same for a file that `write` creates itself at the temporary path it is given (an HDF5 file
// written by the library): then fsync, rename, fsync of the directory. Whatever `write` throws is
// rethrown after the temporary file is removed.
void replace_atomically(const std::filesystem::path& path,
                        const std::function<void(const std::filesystem::path& temporary)>& write);
// The last steps of replace_atomically for a temporary file written by other means (several
// processes writing parts of it): fsync, rename to `path`, fsync of the directory. On failure the
// temporary file is removed and DataError names `path` and the reason.
void commit_atomically(const std::filesystem::path& temporary, const std::filesystem::path& path);

// Writes parts of an existing file at given offsets (pwrite), while other processes may write
// other parts of it: a model-parallel shard's slices of a checkpoint. Throws DataError naming the
// file and the reason (e.g. "No space left on device").
class FileParts {
 public:
  explicit FileParts(const std::filesystem::path& path);  // opens it for writing, never creates it
  FileParts(const FileParts&) = delete;
  FileParts& operator=(const FileParts&) = delete;
  ~FileParts();
  void write_at(std::uint64_t offset, std::span<const std::byte> bytes);
  // fsync, so that the parts are on disk before anyone renames the file, then close.
  void sync_and_close();

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace strata
