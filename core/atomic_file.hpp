// Files that are never seen half-written: written under a temporary name, synced, then renamed.
#pragma once

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

}  // namespace strata
