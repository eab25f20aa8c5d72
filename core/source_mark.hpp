// Where a value came from in a YAML file, for error messages.
#pragma once

namespace strata {

struct SourceMark {
  int line = 0;  // 1-based; 0 = not from a file (defaults)
  int column = 0;
};

}  // namespace strata
