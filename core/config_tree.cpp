#include "core/config_tree.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/stage_config.hpp"

namespace strata {

namespace {

[[noreturn]] void fail_at(const std::string& file, const YAML::Mark& mark, const std::string& why) {
  throw ConfigError(fmt::format("{}:{}:{}: {}", file, mark.line + 1, mark.column + 1, why));
}

// The offset of the first byte that does not belong to a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points above U+10FFFF included), or npos. YAML is UTF-8, and a stray
// Latin-1 byte would otherwise reach directory names and the JSON journals.
std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    unsigned min_next = 0x80, max_next = 0xBF;  // the allowed range of the second byte
    if (lead < 0x80) {
      ++i;
      continue;
    }
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) min_next = 0xA0;  // overlong
      if (lead == 0xED) max_next = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) min_next = 0x90;  // overlong
      if (lead == 0xF4) max_next = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      const unsigned lo = k == 1 ? min_next : 0x80, hi = k == 1 ? max_next : 0xBF;
      if (next < lo || next > hi) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

// ${NAME} and ${NAME:-default} in `text`, as a shell expands them (an empty variable takes the
// default too).
std::string expand(const std::string& text, const std::string& file, const YAML::Mark& mark) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t open = text.find("${", i);
    if (open == std::string::npos) {
      out += text.substr(i);
      break;
    }
    out += text.substr(i, open - i);
    const std::size_t close = text.find('}', open);
    if (close == std::string::npos)
      fail_at(file, mark, fmt::format("'{}': '${{' without its closing '}}'", text));
    const std::string inside = text.substr(open + 2, close - open - 2);
    const std::size_t dash = inside.find(":-");
    const std::string name = inside.substr(0, dash);
    const bool valid = !name.empty() &&
                       (std::isalpha(static_cast<unsigned char>(name[0])) != 0 || name[0] == '_') &&
                       std::all_of(name.begin(), name.end(), [](unsigned char ch) {
                         return std::isalnum(ch) != 0 || ch == '_';
                       });
    if (!valid)
      fail_at(file, mark,
              fmt::format("'${{{}}}': expected ${{NAME}} or ${{NAME:-default}} with NAME a "
                          "variable name",
                          inside));
    const char* value = std::getenv(name.c_str());
    if (value != nullptr && (*value != '\0' || dash == std::string::npos))
      out += value;
    else if (dash != std::string::npos)
      out += inside.substr(dash + 2);
    else
      fail_at(file, mark,
              fmt::format("environment variable {} is not set (write ${{{}:-value}} for a default)",
                          name, name));
    i = close + 1;
  }
  return out;
}

void expand_tree(YAML::Node node, const std::string& file) {
  if (node.IsScalar()) {
    if (node.Scalar().find("${") == std::string::npos) return;
    const std::string expanded = expand(node.Scalar(), file, node.Mark());
    if (first_invalid_utf8(expanded) != std::string_view::npos)
      fail_at(file, node.Mark(),
              fmt::format("'{}' expands to bytes that are not UTF-8 (an environment variable "
                          "holds them)",
                          node.Scalar()));
    node = expanded;
    return;
  }
  if (node.IsSequence())
    for (std::size_t i = 0; i < node.size(); ++i) expand_tree(node[i], file);
  if (node.IsMap())
    for (auto it = node.begin(); it != node.end(); ++it) expand_tree(it->second, file);
}

// "model.layers[2].dense.units" -> keys and indices.
struct Step {
  std::string key;
  int index = -1;  // a list item when >= 0
};

std::vector<Step> parse_path(const std::string& path, const std::string& what) {
  std::vector<Step> steps;
  std::size_t i = 0;
  while (i <= path.size()) {
    const std::size_t dot = path.find('.', i);
    std::string part = path.substr(i, dot == std::string::npos ? std::string::npos : dot - i);
    if (part.empty())
      throw ConfigError(fmt::format("{}: expected key.path=value, e.g. training.epochs=3", what));
    const std::size_t bracket = part.find('[');
    steps.push_back({part.substr(0, bracket), -1});
    while (bracket != std::string::npos && !part.empty()) {
      const std::size_t open = part.find('['), close = part.find(']');
      if (open == std::string::npos) break;
      if (close == std::string::npos || close < open + 2)
        throw ConfigError(fmt::format("{}: '{}': expected a list index as [n]", what, part));
      const std::string digits = part.substr(open + 1, close - open - 1);
      if (!std::all_of(digits.begin(), digits.end(), ::isdigit) || digits.size() > 6)
        throw ConfigError(fmt::format("{}: '{}': expected a list index as [n]", what, part));
      steps.push_back({"", std::stoi(digits)});
      part = part.substr(close + 1);
    }
    if (steps.front().key.empty())
      throw ConfigError(fmt::format("{}: expected key.path=value, e.g. training.epochs=3", what));
    if (dot == std::string::npos) break;
    i = dot + 1;
  }
  return steps;
}

// A tab in a line's indentation is the likeliest cause of a YAML error that names no other (YAML
// indents with spaces only): the first such line up to the error's, as a hint to append, or "".
std::string tab_indent_hint(std::string_view text, int error_line) {
  int line = 1;
  bool indent = true;
  for (const char ch : text) {
    if (line > error_line) break;
    if (ch == '\n') {
      ++line;
      indent = true;
    } else if (indent && ch == '\t') {
      return fmt::format(" (line {} indents with a tab: YAML indents with spaces only)", line);
    } else if (ch != ' ') {
      indent = false;
    }
  }
  return "";
}

// A YAML::Node is a handle: `root` by value still changes the caller's tree.
void apply_override(YAML::Node root,  // NOLINT(performance-unnecessary-value-param)
                    const std::string& text) {
  const std::string what = "--set " + text;
  const std::size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0)
    throw ConfigError(fmt::format("{}: expected key.path=value, e.g. training.epochs=3", what));
  const std::string path = text.substr(0, equals);
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(equals + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: the value is not valid YAML: {}", what, e.msg));
  }
  // A path given on the command line means what the shell means by it: relative to the working
  // directory, not to the config file's (which relative paths in the file are). So do data.path
  // and a transfer's pretrained file (not an artifact name such as hpo.best).
  const bool names_file =
      path == "data.path" || (path.ends_with(".transfer.pretrained") && value.IsScalar() &&
                              !config_reader::names_artifact(value.Scalar()));
  if (names_file && value.IsScalar() && !value.Scalar().empty() &&
      std::filesystem::path(value.Scalar()).is_relative())
    value = std::filesystem::absolute(value.Scalar()).lexically_normal().string();
  const std::vector<Step> steps = parse_path(path, what);
  YAML::Node current;
  current.reset(root);
  std::string walked;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const Step& step = steps[k];
    const bool last = k + 1 == steps.size();
    YAML::Node next;
    if (step.index >= 0) {
      if (!current.IsSequence() || static_cast<std::size_t>(step.index) >= current.size())
        throw ConfigError(fmt::format("{}: {} has no item [{}]", what, walked, step.index));
      if (last) {
        current[static_cast<std::size_t>(step.index)] = value;
        return;
      }
      next.reset(current[static_cast<std::size_t>(step.index)]);
      walked += fmt::format("[{}]", step.index);
    } else {
      if (!current.IsMap() && !current.IsNull())
        throw ConfigError(fmt::format("{}: {} is not a map of settings", what,
                                      walked.empty() ? "the config" : walked));
      if (last) {
        current[step.key] = value;
        return;
      }
      if (!current[step.key] || current[step.key].IsNull())
        current[step.key] = YAML::Node(YAML::NodeType::Map);
      next.reset(current[step.key]);
      walked += (walked.empty() ? "" : ".") + step.key;
    }
    current.reset(next);
  }
}

}  // namespace

YAML::Node load_config_tree(const std::string& text, const std::string& file,
                            const std::vector<std::string>& overrides) {
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    const std::size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
    const std::size_t column_start = line_start == std::string::npos ? 0 : line_start + 1;
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(bad), '\n');
    // The column an editor shows: characters, not bytes (continuation bytes do not count).
    const auto column = 1 + std::count_if(text.begin() + static_cast<long>(column_start),
                                          text.begin() + static_cast<long>(bad), [](char ch) {
                                            return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
                                          });
    throw ConfigError(fmt::format(
        "{}:{}:{}: byte 0x{:02X} is not UTF-8: a config must be UTF-8 text (convert it, e.g. "
        "iconv -f latin1 -t utf-8)",
        file, line, column, static_cast<unsigned char>(text[bad])));
  }
  for (const auto& o : overrides)
    if (const std::size_t bad = first_invalid_utf8(o); bad != std::string_view::npos)
      throw ConfigError(fmt::format("--set {}: byte 0x{:02X} at character {} is not UTF-8", o,
                                    static_cast<unsigned char>(o[bad]), bad + 1));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    const int column = e.mark.is_null() ? 1 : e.mark.column + 1;
    throw ConfigError(fmt::format("{}:{}:{}: malformed YAML: {}{}", file, line, column, e.msg,
                                  tab_indent_hint(text, line)));
  }
  expand_tree(root, file);
  for (const auto& o : overrides) apply_override(root, o);
  return root;
}

std::string attribute_to_override(const std::string& message, const std::string& file,
                                  const std::vector<std::string>& overrides) {
  // A message that names the overrides already (the planner's) stays as it is.
  if (overrides.empty() || !message.starts_with(file + ":") ||
      message.find("(with --set ") != std::string::npos)
    return message;
  // "file:line:column: key.path: why"
  std::size_t at = file.size() + 1;
  for (int colons = 0; colons < 2 && at != std::string::npos; ++colons)
    at = message.find(':', at) == std::string::npos ? std::string::npos : message.find(':', at) + 1;
  if (at == std::string::npos || at + 1 >= message.size()) return message;
  const std::string rest = message.substr(at + 1);  // "key.path: why"
  const std::string key = rest.substr(0, rest.find(": "));
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
    const std::string path = it->substr(0, it->find('='));
    // The value it set or something inside it, or a key it named that does not exist.
    const bool inside = key == path || key.starts_with(path + ".") || key.starts_with(path + "[");
    const bool unknown = rest.find(": unknown key") != std::string::npos &&
                         (path.starts_with(key + ".") || path.starts_with(key + "["));
    if (inside || unknown) return fmt::format("--set {}: {}", *it, rest);
  }
  return message;
}

}  // namespace strata
