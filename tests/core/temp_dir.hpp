// A fresh directory under the system temp directory for one test, removed with its contents at
// scope exit.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace strata::testing {

class TempDir {
 public:
  TempDir() {
    std::random_device entropy;
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("strata-test-{}-{:08x}{:08x}", ::getpid(), entropy(), entropy());
    if (!std::filesystem::create_directory(path_))
      throw std::runtime_error("temp directory exists: " + path_.string());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace strata::testing
