// Reading the YAML config: nodes that carry their key path and position, typed and range-checked
// reads.
#pragma once

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "core/config.hpp"
#include "core/config_names.hpp"
#include "core/errors.hpp"

namespace strata::config_reader {

using Keys = std::span<const std::string_view>;

// ---------------------------------------------------------------------------------------------
// Value checks

struct IntRange {
  std::int64_t min = 0;
  std::int64_t max = std::numeric_limits<int>::max();
};

struct NumRange {
  double min = 0.0;
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = false;

  bool contains(double v) const {
    const bool above = min_open ? v > min : v >= min;
    const bool below = max_open ? v < max : v <= max;
    return above && below;
  }
};

constexpr IntRange at_least_0{0};
constexpr IntRange at_least_1{1};
constexpr NumRange positive{0.0, std::numeric_limits<double>::infinity(), true, false};
constexpr NumRange non_negative{};
constexpr NumRange zero_to_one_open{0.0, 1.0, false, true};  // [0, 1)

inline std::string describe(IntRange r) {
  if (r.max == std::numeric_limits<int>::max()) {
    if (r.min == 0) return "a non-negative integer";
    if (r.min == 1) return "a positive integer";
    return fmt::format("an integer >= {}", r.min);
  }
  return fmt::format("an integer in [{}, {}]", r.min, r.max);
}

inline std::string describe(const NumRange& r) {
  if (std::isinf(r.max)) {
    if (r.min == 0.0 && r.min_open) return "a positive number";
    return fmt::format("a number {} {}", r.min_open ? ">" : ">=", r.min);
  }
  return fmt::format("a number in {}{}, {}{}", r.min_open ? "(" : "[", r.min, r.max,
                     r.max_open ? ")" : "]");
}

// Accepts what YAML's core schema calls an integer in decimal; a leading '+' is allowed.
// Values beyond int64 saturate so that the caller reports them as out of range.
inline std::optional<std::int64_t> parse_integer(std::string_view text) {
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (text.empty() || text.front() == '-') return std::nullopt;
  }
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ptr != end) return std::nullopt;
  if (ec == std::errc::result_out_of_range)
    return text.front() == '-' ? std::numeric_limits<std::int64_t>::min()
                               : std::numeric_limits<std::int64_t>::max();
  if (ec != std::errc{}) return std::nullopt;
  return value;
}

inline std::optional<double> parse_number(std::string_view text) {
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (text.empty() || text.front() == '-') return std::nullopt;
  }
  double value = 0.0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  // from_chars also reads "inf" and "nan"; no setting here has a use for them.
  if (ec != std::errc{} || ptr != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

template <class E, std::size_t N>
std::string choice_names(const std::array<Choice<E>, N>& choices) {
  std::string out;
  for (const auto& c : choices)
    out += out.empty() ? std::string(c.name) : fmt::format(", {}", c.name);
  return out;
}

inline SourceMark to_source_mark(const YAML::Mark& mark, SourceMark fallback) {
  if (mark.is_null()) return fallback;
  return {mark.line + 1, mark.column + 1};
}

inline std::string join_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

// ---------------------------------------------------------------------------------------------
// Reader: one YAML node with the key path and position that every error message needs.

class Reader {
 public:
  Reader(const YAML::Node& node, std::string path, SourceMark mark, const std::string& file)
      : node_(node), path_(std::move(path)), mark_(mark), file_(&file) {}

  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  SourceMark mark() const { return mark_; }

  [[noreturn]] void fail(std::string_view message) const {
    // The top level has no key path; leaving it out reads better than an empty field.
    if (path_.empty())
      throw ConfigError(fmt::format("{}:{}:{}: {}", *file_, mark_.line, mark_.column, message));
    throw ConfigError(
        fmt::format("{}:{}:{}: {}: {}", *file_, mark_.line, mark_.column, path_, message));
  }

  Reader item(std::size_t index, const YAML::Node& node) const {
    return Reader(node, fmt::format("{}[{}]", path_, index), to_source_mark(node.Mark(), mark_),
                  *file_);
  }

  Reader with(const YAML::Node& node, std::string path, SourceMark mark) const {
    return Reader(node, std::move(path), mark, *file_);
  }

  // A short description of what was found, for "expected X, got Y" messages.
  std::string found() const {
    if (node_.IsNull()) return "nothing";
    if (node_.IsSequence()) return "a list";
    if (node_.IsMap()) return "a map";
    if (node_.Tag() != "?") return fmt::format("'{}' (quoted, so a string)", node_.Scalar());
    return fmt::format("'{}'", node_.Scalar());
  }

  std::string as_string() const {
    if (!node_.IsScalar()) fail(fmt::format("expected a string, got {}", found()));
    return node_.Scalar();
  }

  std::string as_nonempty_string() const {
    std::string s = as_string();
    if (s.empty()) fail("expected a non-empty string");
    return s;
  }

  bool as_bool() const {
    const std::string& text = plain_scalar("true or false");
    if (text == "true") return true;
    if (text == "false") return false;
    fail(fmt::format("expected true or false, got {}", found()));
  }

  int as_int(IntRange range) const {
    const std::string& text = plain_scalar("an integer");
    const auto value = parse_integer(text);
    if (!value) fail(fmt::format("expected an integer, got {}", found()));
    // The limit goes into the message: "a positive integer" alone does not say that 2^31 is too
    // large.
    if (*value > range.max && range.max == std::numeric_limits<int>::max())
      fail(fmt::format("expected {}, got {}, above the largest allowed, {}", describe(range), text,
                       range.max));
    if (*value < range.min || *value > range.max)
      fail(fmt::format("expected {}, got {}", describe(range), text));
    return static_cast<int>(*value);
  }

  std::uint64_t as_uint64() const {
    const std::string& text = plain_scalar("an integer");
    const auto value = parse_integer(text);
    if (!value) fail(fmt::format("expected an integer, got {}", found()));
    if (*value < 0) fail(fmt::format("expected a non-negative integer, got {}", text));
    std::uint64_t out = 0;
    const std::string_view digits = text.front() == '+' ? std::string_view(text).substr(1) : text;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    if (ec != std::errc{})
      fail(fmt::format("expected an integer in [0, {}], got {}",
                       std::numeric_limits<std::uint64_t>::max(), text));
    return out;
  }

  double as_number(const NumRange& range) const {
    const std::string& text = plain_scalar("a number");
    const auto value = parse_number(text);
    if (!value) fail(fmt::format("expected a number, got {}", found()));
    if (!range.contains(*value)) fail(fmt::format("expected {}, got {}", describe(range), text));
    return *value;
  }

  template <class E, std::size_t N>
  E as_choice(const std::array<Choice<E>, N>& choices, std::string_view what) const {
    const std::string name = as_string();
    for (const auto& c : choices)
      if (c.name == name) return c.value;
    fail(fmt::format("unknown {} '{}' (known: {})", what, name, choice_names(choices)));
  }

 private:
  // Numbers and booleans must be plain scalars: a quoted "42" is a string in YAML, and
  // accepting it would hide quoting mistakes that other YAML tools treat differently.
  const std::string& plain_scalar(std::string_view expected) const {
    if (!node_.IsScalar() || node_.Tag() != "?")
      fail(fmt::format("expected {}, got {}", expected, found()));
    return node_.Scalar();
  }

  YAML::Node node_;
  std::string path_;
  SourceMark mark_;
  const std::string* file_;  // outlives every Reader: it is the caller's argument
};

// Keys that are valid only for another `type` of the same section, for a clearer message.
struct KeyOwner {
  std::string_view key;
  std::string_view owner;
};

// A map whose keys are all scalars and unique; `allow_only` then rejects unknown ones.
// A null node counts as an empty map so that "section:" with nothing under it means defaults.
class MapReader {
 public:
  explicit MapReader(const Reader& where) : where_(where) {
    if (where.node().IsNull()) return;
    if (!where.node().IsMap()) where.fail(fmt::format("expected a map, got {}", where.found()));
    for (auto it = where.node().begin(); it != where.node().end(); ++it)
      add_entry(it->first, it->second);
  }

  const Reader& where() const { return where_; }
  std::size_t size() const { return entries_.size(); }

  void allow_only(Keys known, std::span<const KeyOwner> owners = {},
                  std::string_view owner_noun = {}) const {
    for (const auto& e : entries_) {
      if (contains(known, e.key)) continue;
      const std::string known_list =
          known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "));
      for (const auto& o : owners)
        if (o.key == e.key)
          e.key_at.fail(fmt::format("unknown key (known: {}); '{}' belongs to {} '{}'", known_list,
                                    e.key, owner_noun, o.owner));
      e.key_at.fail(fmt::format("unknown key (known: {})", known_list));
    }
  }

  std::optional<Reader> get(std::string_view key) const {
    for (const auto& e : entries_)
      if (e.key == key) return e.value;
    return std::nullopt;
  }

  Reader require(std::string_view key) const {
    if (auto value = get(key)) return *value;
    where_.fail(fmt::format("missing required key '{}'", key));
  }

  // The first entry, for single-key maps such as "- dense: {units: 10}".
  std::pair<Reader, Reader> first_entry() const {
    return {entries_.front().key_at, entries_.front().value};
  }

  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.key);
    return out;
  }

 private:
  struct Entry {
    std::string key;
    Reader key_at;
    Reader value;
  };

  static bool contains(Keys keys, std::string_view key) {
    for (auto k : keys)
      if (k == key) return true;
    return false;
  }

  void add_entry(const YAML::Node& key, const YAML::Node& value) {
    const SourceMark key_mark = to_source_mark(key.Mark(), where_.mark());
    if (!key.IsScalar())
      where_.with(key, where_.path(), key_mark)
          .fail("expected a plain key (a string), got a complex key");
    const std::string path = join_path(where_.path(), key.Scalar());
    Reader key_at = where_.with(key, path, key_mark);
    // yaml-cpp places an empty value at the next token, often on the next line; the key is where
    // the reader should look.
    const SourceMark value_mark =
        value.IsNull() ? key_mark : to_source_mark(value.Mark(), key_mark);
    // yaml-cpp keeps both entries of a duplicated key; the second would be silently ignored.
    if (get(key.Scalar())) key_at.fail("duplicate key");
    entries_.push_back({key.Scalar(), std::move(key_at), where_.with(value, path, value_mark)});
  }

  Reader where_;
  std::vector<Entry> entries_;
};

// Optional fields: read only when present, so the struct's defaults stay otherwise.
inline void read(const MapReader& m, std::string_view key, int& out, IntRange range) {
  if (auto v = m.get(key)) out = v->as_int(range);
}
inline void read(const MapReader& m, std::string_view key, double& out, const NumRange& range) {
  if (auto v = m.get(key)) out = v->as_number(range);
}
inline void read(const MapReader& m, std::string_view key, float& out, const NumRange& range) {
  if (auto v = m.get(key)) out = static_cast<float>(v->as_number(range));
}
inline void read(const MapReader& m, std::string_view key, bool& out) {
  if (auto v = m.get(key)) out = v->as_bool();
}
inline void read(const MapReader& m, std::string_view key, std::string& out) {
  if (auto v = m.get(key)) out = v->as_nonempty_string();
}
inline void read(const MapReader& m, std::string_view key, std::uint64_t& out) {
  if (auto v = m.get(key)) out = v->as_uint64();
}
template <class E, std::size_t N>
void read(const MapReader& m, std::string_view key, E& out, const std::array<Choice<E>, N>& choices,
          std::string_view what) {
  if (auto v = m.get(key)) out = v->as_choice(choices, what);
}

}  // namespace strata::config_reader
