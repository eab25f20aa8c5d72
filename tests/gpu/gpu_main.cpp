// The GPU tests' main: on a machine where the CUDA runtime sees no GPU, a run of tests tagged
// [gpu] exits 77, which CTest reports as skipped, test by test; the others (pure host logic) and
// listing the tests (CTest's discovery) run anywhere.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>

#include "cuda/device_memory.hpp"

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const Catch::Config& config = session.config();
  if (!config.listTestNamesOnly() && !config.listTests() && strata::cuda::visible_devices() == 0) {
    const auto tests =
        Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
    const bool needs_gpu = std::any_of(tests.begin(), tests.end(), [](const Catch::TestCase& t) {
      return std::find(t.tags.begin(), t.tags.end(), "gpu") != t.tags.end();
    });
    if (needs_gpu) {
      std::printf("skipped: the CUDA runtime sees no GPU on this machine\n");
      return 77;
    }
  }
  return session.run();
}
