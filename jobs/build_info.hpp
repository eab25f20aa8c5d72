// What the strata binary was built from and with (version, git revision, compiler and flags), for
// run.json and --version.
#pragma once

#include <string_view>

namespace strata {

struct BuildInfo {
  std::string_view version;       // the project's version (CMakeLists.txt)
  std::string_view git_revision;  // git describe --always --dirty at build time
  std::string_view compiler;      // "GNU 12.2.0"
  std::string_view flags;         // the C++ flags of the build type, -march=native included
  std::string_view build_type;    // Release, Debug, ...
};

// Generated at build time (cmake/build_info.cmake).
const BuildInfo& build_info();

}  // namespace strata
