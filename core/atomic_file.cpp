#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

namespace {

// Owns a file descriptor.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, so that a failing close (NFS reports write errors there) can be seen.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int error) {
  throw DataError(
      fmt::format("cannot write {}: {} failed: {}", path.string(), what, std::strerror(error)));
}

void sync_directory(const std::filesystem::path& path) {
  const auto dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  Descriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY));
  // Some file systems cannot sync a directory; the rename itself is still atomic there.
  if (fd.get() >= 0) ::fsync(fd.get());
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::span<const char> bytes) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  auto give_up = [&](const char* what) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail(path, what, error);
  };
  Descriptor fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail(path, "open", errno);
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      give_up("write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) give_up("fsync");
  if (fd.close() != 0) give_up("close");
  if (::rename(temporary.c_str(), path.c_str()) != 0) give_up("rename");
  sync_directory(path);
}

void replace_atomically(const std::filesystem::path& path,
                        const std::function<void(const std::filesystem::path& temporary)>& write) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  try {
    write(temporary);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  commit_atomically(temporary, path);
}

void commit_atomically(const std::filesystem::path& temporary, const std::filesystem::path& path) {
  auto give_up = [&](const char* what) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail(path, what, error);
  };
  Descriptor fd(::open(temporary.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) give_up("open");
  if (::fsync(fd.get()) != 0) give_up("fsync");
  if (fd.close() != 0) give_up("close");
  if (::rename(temporary.c_str(), path.c_str()) != 0) give_up("rename");
  sync_directory(path);
}

FileParts::FileParts(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path_, "open", errno);
}

FileParts::~FileParts() {
  if (fd_ >= 0) ::close(fd_);
}

void FileParts::write_at(std::uint64_t offset, std::span<const std::byte> bytes) {
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(path_, "pwrite", n == 0 ? ENOSPC : errno);
    done += static_cast<std::size_t>(n);
  }
}

void FileParts::sync_and_close() {
  if (::fsync(fd_) != 0) fail(path_, "fsync", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail(path_, "close", errno);
}

void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  write_file_atomically(path, std::span<const char>(text.data(), text.size()));
}

}  // namespace strata
