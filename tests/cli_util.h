// Runs the ckptplan binary for golden and exit-code tests.
#ifndef CKPTPLAN_TESTS_CLI_UTIL_H_
#define CKPTPLAN_TESTS_CLI_UTIL_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ckptplan::testing {

struct CliResult {
  int code = -1;
  std::string out, err;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

/// A fresh, empty directory for one test's files, per process (test runs of
/// several checkouts on one machine share /tmp).
inline std::string ScratchDir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("ckptplan_test_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

/// Runs `ckptplan ARGS` (ARGS is shell text) from the source directory.
inline CliResult RunCli(const std::string& args, const std::string& env = "") {
  const std::string dir = ScratchDir("cli_capture");
  const std::string command = "cd " CKPTPLAN_SOURCE_DIR " && " + env + " " CKPTPLAN_BINARY " " +
                              args + " >" + dir + "/out 2>" + dir + "/err";
  int status = std::system(command.c_str());
  CliResult result;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = Slurp(dir + "/out");
  result.err = Slurp(dir + "/err");
  return result;
}

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_CLI_UTIL_H_
