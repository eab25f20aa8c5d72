// Line and point charts as inline SVG, for the self-contained HTML report.
#pragma once

#include <string>
#include <vector>

namespace strata {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
  bool lines = true;  // false: points only (every trial of a search)
  std::string color;  // empty: the next of a fixed palette
  double stroke_width = 1.5;
};

// An SVG of `width` x `height` pixels: axes with ticks at round values, one polyline (or points)
// per series, and a legend of the named series. NaN points are left out.
std::string svg_chart(const std::string& title, const std::string& x_label,
                      const std::string& y_label, const std::vector<ChartSeries>& series,
                      int width = 520, int height = 280);

// Text made safe for HTML and SVG.
std::string html_escape(const std::string& text);

}  // namespace strata
