// A small MLP training graph shared by the report tests, and helpers to run
// the CLI on it.
#ifndef CKPTPLAN_TESTS_REPORT_FIXTURE_H_
#define CKPTPLAN_TESTS_REPORT_FIXTURE_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ckptplan::testing {

// Parameters w1, w2: 4 KiB each (2048 float32 elements in all), adam: 8
// bytes per parameter = 16 KiB optimizer state; input x 1 KiB.
// Save-all peaks at fc2_bwd: params 8 + optimizer 16 + input 1 + dw2 4 +
// saved h1 8 + a1 8 + temporaries dh2 2 + da1 8 = 55 KiB.
// With --budget 54KiB the greedy drops h1 (recomputed by fc1 before
// act_bwd) and the peak moves to act_bwd: params 8 + optimizer 16 + input 1
// + dw2 4 + recomputed h1 8 + temporaries da1 8 + dh1 8 = 53 KiB.
inline constexpr const char* kMlpGraph = R"({"format": "ckptplan.graph", "version": 1,
 "training": {"optimizer": "adam"},
 "tensors": [
  {"id": "x", "kind": "input", "bytes": 1024},
  {"id": "w1", "kind": "parameter", "bytes": 4096},
  {"id": "w2", "kind": "parameter", "bytes": 4096},
  {"id": "h1", "bytes": 8192},
  {"id": "a1", "bytes": 8192},
  {"id": "h2", "bytes": 2048},
  {"id": "loss", "bytes": 4},
  {"id": "dh2", "bytes": 2048},
  {"id": "dw2", "kind": "gradient", "bytes": 4096},
  {"id": "da1", "bytes": 8192},
  {"id": "dh1", "bytes": 8192},
  {"id": "dw1", "kind": "gradient", "bytes": 4096}
 ],
 "nodes": [
  {"id": "fc1", "op": "linear", "scope": "mlp/fc1", "phase": "forward", "inputs": ["x", "w1"], "outputs": ["h1"], "time_us": 10},
  {"id": "act", "op": "gelu", "scope": "mlp", "phase": "forward", "inputs": ["h1"], "outputs": ["a1"], "time_us": 2},
  {"id": "fc2", "op": "linear", "scope": "mlp/fc2", "phase": "forward", "inputs": ["a1", "w2"], "outputs": ["h2"], "time_us": 10},
  {"id": "loss_fn", "op": "mse", "phase": "forward", "inputs": ["h2"], "outputs": ["loss"], "time_us": 1},
  {"id": "loss_bwd", "op": "mse_backward", "phase": "backward", "inputs": ["loss", "h2"], "outputs": ["dh2"], "time_us": 1},
  {"id": "fc2_bwd", "op": "linear_backward", "scope": "mlp/fc2", "phase": "backward", "inputs": ["dh2", "a1", "w2"], "outputs": ["dw2", "da1"], "time_us": 20},
  {"id": "act_bwd", "op": "gelu_backward", "scope": "mlp", "phase": "backward", "inputs": ["da1", "h1"], "outputs": ["dh1"], "time_us": 2},
  {"id": "fc1_bwd", "op": "linear_backward", "scope": "mlp/fc1", "phase": "backward", "inputs": ["dh1", "x"], "outputs": ["dw1"], "time_us": 10},
  {"id": "adam", "op": "adam_step", "phase": "optimizer", "inputs": ["dw1", "dw2", "w1", "w2"], "outputs": [], "time_us": 5}
 ]})";

/// A fresh empty directory under the system temp dir, removed on scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("ckptplan_" + tag + "_" + std::to_string(getpid()) + "_" + std::to_string(++counter));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void Spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// Runs the ckptplan binary with `args` (already shell-quoted), stdout and
/// stderr to files in `dir`; returns the exit status.
inline int RunCli(const TempDir& dir, const std::string& args) {
  std::string command = std::string("'") + CKPTPLAN_BINARY + "' " + args + " >'" + (dir / "out") +
                        "' 2>'" + (dir / "err") + "'";
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline size_t CountOf(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_REPORT_FIXTURE_H_
