// `strata report OUTPUT_DIR`: one self-contained HTML page (inline SVG, no scripts, no network)
// with what a run's stages wrote: training curves per member, the search's fitness per generation,
// the ensemble and transfer tables, and the plan.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "jobs/commands.hpp"
#include "jobs/svg_chart.hpp"

namespace strata {

namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::json> read_jsonl(const fs::path& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto row = nlohmann::json::parse(line, nullptr, false);
    if (!row.is_discarded() && row.is_object()) rows.push_back(std::move(row));
  }
  return rows;
}

std::optional<nlohmann::json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  auto json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

double number(const nlohmann::json& row, const char* key) {
  return row.contains(key) && row[key].is_number() ? row[key].get<double>()
                                                   : std::numeric_limits<double>::quiet_NaN();
}

std::string percent(const nlohmann::json& value) {
  return value.is_number() ? fmt::format("{:.2f}%", 100.0 * value.get<double>()) : "–";
}

// The metrics.jsonl of every directory under `parent` named by an integer, in numeric order.
std::vector<std::pair<int, fs::path>> numbered_metrics(const fs::path& parent) {
  std::vector<std::pair<int, fs::path>> found;
  if (!fs::is_directory(parent)) return found;
  for (const auto& entry : fs::directory_iterator(parent)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(),
                                     [](unsigned char ch) { return std::isdigit(ch) != 0; }))
      continue;
    if (fs::exists(entry.path() / "metrics.jsonl"))
      found.emplace_back(std::stoi(name), entry.path() / "metrics.jsonl");
  }
  std::sort(found.begin(), found.end());
  return found;
}

// The training loss of steps.jsonl on the epoch axis (step s of an epoch of n steps at epoch - 1 +
// s / n), as means over at most `most` runs of consecutive steps: a long training's thousands of
// steps would make a page of megabytes. Every epoch of a training has as many steps, so a last
// epoch cut short (a training still going, stopped or timed out) ends short of its whole.
std::vector<std::pair<double, double>> step_losses(const fs::path& path, std::size_t most = 400) {
  const std::vector<nlohmann::json> rows = read_jsonl(path);
  double steps_per_epoch = 1.0;
  for (const auto& row : rows) steps_per_epoch = std::max(steps_per_epoch, number(row, "step"));
  const std::size_t per_point = rows.size() / most + 1;
  std::vector<std::pair<double, double>> points;
  double x = 0.0, loss = 0.0;
  std::size_t in_point = 0;
  for (const auto& row : rows) {
    const double epoch = number(row, "epoch");
    x = epoch - 1.0 + number(row, "step") / steps_per_epoch;
    loss += number(row, "loss");
    if (++in_point == per_point) {
      points.emplace_back(x, loss / static_cast<double>(in_point));
      loss = 0.0;
      in_point = 0;
    }
  }
  if (in_point > 0) points.emplace_back(x, loss / static_cast<double>(in_point));
  return points;
}

// Train loss (per step where the training logged its steps) and validation accuracy per epoch, a
// line per training; `thin`: many grey lines (a search's trials) instead of a legend.
std::string curves(const std::string& what,
                   const std::vector<std::pair<std::string, fs::path>>& runs, bool thin) {
  std::vector<ChartSeries> loss, accuracy;
  for (const auto& [name, path] : runs) {
    ChartSeries l{thin ? "" : name, {}, true, thin ? "#9aa" : "", thin ? 0.8 : 1.5};
    ChartSeries a = l;
    // Per step where the training logged its steps (an empty file: killed before its first).
    const fs::path steps = path.parent_path() / "steps.jsonl";
    if (fs::exists(steps)) l.points = step_losses(steps);
    const bool per_epoch = l.points.empty();
    for (const auto& row : read_jsonl(path)) {
      if (per_epoch) l.points.emplace_back(number(row, "epoch"), number(row, "train_loss"));
      a.points.emplace_back(number(row, "epoch"), number(row, "val_accuracy"));
    }
    loss.push_back(std::move(l));
    accuracy.push_back(std::move(a));
  }
  if (loss.empty()) return "";
  return "<div class=\"charts\">" +
         svg_chart(what + ": training loss", "epoch", "train loss", loss) +
         svg_chart(what + ": validation accuracy", "epoch", "val accuracy", accuracy) + "</div>\n";
}

std::string search_section(const fs::path& dir, const nlohmann::json& summary) {
  std::string html = "<h3>Search</h3>\n";
  ChartSeries best{"best in population", {}, true, "#d62728", 2.0};
  ChartSeries mean{"mean", {}, true, "#1f77b4", 1.5};
  for (const auto& g : summary.value("generations", nlohmann::json::array())) {
    best.points.emplace_back(number(g, "generation"), number(g, "best"));
    mean.points.emplace_back(number(g, "generation"), number(g, "mean"));
  }
  // Population-based training has a row per member per round (pbt.jsonl), and members, not trials.
  const bool pbt = summary.value("algorithm", std::string()) == "pbt";
  ChartSeries trials{pbt ? "each member" : "each trial", {}, false, "#555", 1.0};
  if (pbt) {
    for (const auto& row : read_jsonl(dir / "pbt.jsonl"))
      if (row.contains("fitness") && row["fitness"].is_number())
        trials.points.emplace_back(number(row, "round"), number(row, "fitness"));
  } else {
    for (const auto& row : read_jsonl(dir / "trials.jsonl"))
      if (row.value("status", "") == "ok")
        trials.points.emplace_back(number(row, "generation"), number(row, "fitness"));
  }
  html += "<div class=\"charts\">" +
          svg_chart("Fitness per generation", "generation", "fitness", {trials, mean, best}) +
          "</div>\n";
  if (summary.contains("best") && summary["best"].is_object()) {
    const auto& b = summary["best"];
    html += fmt::format(
        "<p>Best: trial {} with fitness {:.4f}; parameters <code>{}</code>. "
        "{} trainings, stopped: {}.</p>\n",
        b.value("trial", -1), number(b, "fitness"),
        html_escape(b.value("params", nlohmann::json::object()).dump()),
        summary.value("trainings", 0), html_escape(summary.value("stop_reason", std::string())));
  }
  std::vector<std::pair<std::string, fs::path>> runs;
  for (const auto& [id, path] : numbered_metrics(dir / (pbt ? "members" : "trials")))
    runs.emplace_back(fmt::format("{} {}", pbt ? "member" : "trial", id), path);
  return html + curves(pbt ? "Members" : "Trials", runs, true);
}

std::string ensemble_section(const fs::path& dir, const nlohmann::json& report) {
  std::string html =
      "<h3>Ensemble</h3>\n<table><tr><th>member</th><th>from</th><th>variation</th>"
      "<th>val acc</th><th>test acc</th><th>weight</th></tr>\n";
  for (const auto& m : report.value("members", nlohmann::json::array()))
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td></tr>\n",
        m.value("member", -1), html_escape(m.value("source", std::string())),
        html_escape(m.value("variation", std::string())), percent(m["val_accuracy"]),
        percent(m["test_accuracy"]), number(m, "weight"));
  html +=
      "</table>\n<table><tr><th>combiner</th><th>val acc</th><th>test acc</th>"
      "<th>gain over the best member (points)</th></tr>\n";
  const nlohmann::json combiners = report.value("combiners", nlohmann::json::object());
  for (const auto& [name, c] : combiners.items())
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:+.2f}</td></tr>\n",
                        html_escape(name), percent(c["val_accuracy"]), percent(c["test_accuracy"]),
                        number(c, "gain_over_best_member_points"));
  html += "</table>\n";
  std::vector<std::pair<std::string, fs::path>> runs;
  for (const auto& [id, path] : numbered_metrics(dir / "ensemble"))
    runs.emplace_back(fmt::format("member {}", id), path);
  return html + curves("Ensemble members", runs, false);
}

std::string transfer_section(const fs::path& dir, const nlohmann::json& report) {
  std::string html = fmt::format(
      "<h3>Transfer</h3>\n<p>From {} ({}); {} training samples{}.</p>\n"
      "<table><tr><th>training</th><th>epochs</th><th>val acc</th><th>test acc</th></tr>\n",
      html_escape(report["pretrained"].value("source", std::string())),
      html_escape(report["pretrained"].value("weights", std::string())),
      report.value("training_samples", 0),
      report.value("samples_per_class", 0) > 0
          ? fmt::format(" ({} per class)", report["samples_per_class"].get<int>())
          : "");
  for (const char* key : {"fine_tuned", "scratch"})
    if (report.contains(key))
      html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                          key == std::string("scratch") ? "from scratch" : "fine-tuned",
                          report[key].value("epoch", 0), percent(report[key]["val_accuracy"]),
                          percent(report[key]["test_accuracy"]));
  html += "</table>\n";
  if (report.contains("gain_over_scratch_points"))
    html += fmt::format(
        "<p>Fine-tuning against training from scratch: {:+.2f} points of test "
        "accuracy.</p>\n",
        number(report, "gain_over_scratch_points"));
  std::vector<std::pair<std::string, fs::path>> runs;
  for (const auto& [id, path] : numbered_metrics(dir / "transfer"))
    runs.emplace_back(id == 0 ? "fine-tuned" : "from scratch", path);
  return html + curves("Transfer", runs, false);
}

std::string hierarchy_section(const fs::path& dir, const nlohmann::json& report) {
  std::string html = fmt::format(
      "<h3>Hierarchical transfer</h3>\n<p>Super-classes <code>{}</code>; coarse classifier from "
      "{}, {} on the super-classes.</p>\n<table><tr><th>model</th><th>parameters</th><th>val "
      "acc</th><th>test acc</th></tr>\n",
      html_escape(report.value("super_classes", nlohmann::json::object()).dump()),
      html_escape(report.value("coarse_from", std::string())),
      percent(report["coarse"]["test_accuracy"]));
  for (const char* key : {"hierarchical", "flat"})
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", key,
                        report[key].value("parameters", 0), percent(report[key]["val_accuracy"]),
                        percent(report[key]["test_accuracy"]));
  html += fmt::format("</table>\n<p>Hierarchical against flat: {:+.2f} points.</p>\n",
                      number(report, "gain_over_flat_points"));
  std::vector<std::pair<std::string, fs::path>> runs;
  for (const auto& [id, path] : numbered_metrics(dir / "hierarchy" / "first"))
    runs.emplace_back(id == 0 ? "coarse" : "flat", path);
  const auto subs = report.value("sub_classifiers", nlohmann::json::array());
  for (const auto& [id, path] : numbered_metrics(dir / "hierarchy" / "subs"))
    runs.emplace_back(static_cast<std::size_t>(id) < subs.size()
                          ? subs[static_cast<std::size_t>(id)].value("super_class", std::string())
                          : fmt::format("sub {}", id),
                      path);
  return html + curves("Hierarchy", runs, false);
}

// Everything one stage directory holds that the report knows.
std::string stage_sections(const fs::path& dir) {
  std::string html;
  std::vector<std::pair<std::string, fs::path>> members;
  if (fs::exists(dir / "metrics.jsonl")) members.emplace_back("training", dir / "metrics.jsonl");
  for (const auto& [id, path] : numbered_metrics(dir / "members"))
    members.emplace_back(fmt::format("member {}", id), path);
  if (!members.empty()) html += "<h3>Training</h3>\n" + curves("Training", members, false);
  if (const auto s = read_json(dir / "hpo_summary.json")) html += search_section(dir, *s);
  if (const auto e = read_json(dir / "ensemble_report.json")) html += ensemble_section(dir, *e);
  if (const auto t = read_json(dir / "transfer_report.json")) html += transfer_section(dir, *t);
  if (const auto h = read_json(dir / "hierarchy_report.json")) html += hierarchy_section(dir, *h);
  return html;
}

}  // namespace

int report_command(const std::string& dir_path, const std::string& out_path) {
  const fs::path dir(dir_path);
  if (!fs::is_directory(dir))
    throw DataError(
        fmt::format("{}: not a directory (strata report takes a run's output.dir)", dir_path));
  std::string body = stage_sections(dir);
  std::vector<fs::path> subdirectories;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory()) subdirectories.push_back(entry.path());
  std::sort(subdirectories.begin(), subdirectories.end());
  for (const auto& sub : subdirectories)
    if (fs::exists(sub / "hpo_summary.json") || fs::exists(sub / "ensemble_report.json") ||
        fs::exists(sub / "transfer_report.json") || fs::exists(sub / "hierarchy_report.json") ||
        fs::exists(sub / "metrics.jsonl"))
      body += fmt::format("<h2>Stage {}</h2>\n", html_escape(sub.filename().string())) +
              stage_sections(sub);
  if (body.empty())
    throw DataError(fmt::format(
        "{}: no results of a run in it (metrics.jsonl, hpo_summary.json, ensemble_report.json, "
        "transfer_report.json, hierarchy_report.json)",
        dir_path));
  const std::string plan = read_text(dir / "plan.txt");
  const std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>strata report: {0}</title>\n<style>\n"
      "body {{ font-family: sans-serif; margin: 2em; color: #222; max-width: 1200px; }}\n"
      "table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}\n"
      "td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}\n"
      ".charts svg {{ margin: 0 1em 1em 0; }}\npre {{ background: #f6f6f6; padding: 0.8em; }}\n"
      "</style></head><body>\n<h1>strata report: {0}</h1>\n{1}\n<h2>Plan</h2>\n<pre>{2}</pre>\n"
      "</body></html>\n",
      html_escape(dir_path), body, html_escape(plan.empty() ? "(no plan.txt)" : plan));
  const fs::path out = out_path.empty() ? dir / "report.html" : fs::path(out_path);
  write_text_atomically(out, html);
  fmt::print("wrote {}\n", out.string());
  return 0;
}

}  // namespace strata
