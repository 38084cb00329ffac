// Runs the ckptplan binary (CKPTPLAN_BINARY) with exact arguments (no shell:
// empty and odd arguments pass as they are) and extra environment variables,
// capturing its exit status, the signal that killed it, and stderr.
#ifndef CKPTPLAN_TESTS_SPAWN_UTIL_H_
#define CKPTPLAN_TESTS_SPAWN_UTIL_H_

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace ckptplan::testing {

struct SpawnResult {
  int exit_code = -1;  ///< -1 when killed by a signal
  int signal = 0;      ///< the signal that ended it, 0 if it exited
  std::string err;     ///< stderr
};

/// Runs CKPTPLAN_BINARY with `args` (no shell), adding `env` ("NAME=value")
/// to this process's environment; stdout is discarded.
inline SpawnResult Spawn(const std::vector<std::string>& args,
                        const std::vector<std::string>& env = {}) {
  namespace fs = std::filesystem;
  const fs::path err_path =
      fs::temp_directory_path() / ("ckptplan_spawn_" + std::to_string(getpid()) + ".err");
  std::vector<std::string> argv_storage{CKPTPLAN_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage(env.begin(), env.end());
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  SpawnResult result;
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    result.err = "posix_spawn failed";
    return result;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  std::ifstream in(err_path);
  std::ostringstream text;
  text << in.rdbuf();
  result.err = text.str();
  fs::remove(err_path);
  return result;
}

/// Names of the entries in `dir`, sorted.
inline std::vector<std::string> ListDir(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_SPAWN_UTIL_H_
