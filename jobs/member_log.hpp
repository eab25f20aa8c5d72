// A training's own log: every line into its log.txt (appended across allocations), and to the
// console as well when asked, with a prefix that names the group.
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace strata {

class MemberLog {
 public:
  // `file` empty: a rank that writes nothing. `console_prefix`: echo lines to stdout after it.
  MemberLog(const std::filesystem::path& file, std::optional<std::string> console_prefix);
  // Into the file, and to the console when echoing.
  void line(const std::string& text) const;
  // Into the file only: what a person reads when something looks wrong (kernels chosen).
  void detail(const std::string& text) const;

 private:
  mutable std::ofstream file_;
  std::optional<std::string> console_prefix_;
};

}  // namespace strata
