#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // keep test output to failures
  // The CLI runs these tests start behave as they would outside GitHub Actions
  // (check annotates there by default); tests that want it set it themselves.
  unsetenv("GITHUB_ACTIONS");
  unsetenv("GITHUB_STEP_SUMMARY");
  return doctest::Context(argc, argv).run();
}
