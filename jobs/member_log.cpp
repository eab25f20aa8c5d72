#include "jobs/member_log.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

MemberLog::MemberLog(const std::filesystem::path& file, std::optional<std::string> console_prefix)
    : console_prefix_(std::move(console_prefix)) {
  if (file.empty()) return;
  file_.open(file, std::ios::out | std::ios::app);
  if (!file_) throw DataError(fmt::format("cannot write {}", file.string()));
}

void MemberLog::line(const std::string& text) const {
  detail(text);
  if (!console_prefix_) return;
  fmt::print("{}{}\n", *console_prefix_, text);
  std::fflush(stdout);
}

void MemberLog::detail(const std::string& text) const {
  if (!file_.is_open()) return;
  file_ << text << '\n';
  file_.flush();
}

}  // namespace strata
