#include "ckptplan/plan/recompute_policy.h"

#include <fstream>
#include <sstream>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

bool ValidOpName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string Trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(" \t\r");
  return std::string(text.substr(begin, end - begin + 1));
}

}  // namespace

std::string NormalizeOpName(std::string_view op) {
  std::string name;
  for (char c : op) {
    if (c == '_') continue;
    name += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return name;
}

const std::vector<std::string>& DefaultRecomputableOps() {
  // Elementwise (unary and binary), views and normalisations. Not here on
  // purpose: matmul, bmm, linear, conv, attention (compute-bound) and
  // dropout or other random ops (their RNG state would have to be replayed).
  static const std::vector<std::string> kOps = {
      // elementwise (aten / ONNX)
      "abs", "add", "cast", "clamp", "clip", "cos", "div", "elu", "erf", "exp", "gelu",
      "hardswish", "leaky_relu", "log", "mul", "neg", "pow", "reciprocal", "relu", "rsqrt",
      "sigmoid", "silu", "sin", "sqrt", "square", "sub", "tanh", "where",
      // views and data movement
      "cat", "concat", "contiguous", "expand", "flatten", "identity", "permute", "reshape",
      "select", "slice", "split", "squeeze", "transpose", "unsqueeze", "view",
      // normalisations
      "batch_norm", "batch_normalization", "group_norm", "group_normalization", "layer_norm",
      "layer_normalization", "log_softmax", "rms_norm", "rms_normalization", "softmax"};
  return kOps;
}

RecomputePolicy DefaultRecomputePolicy() {
  RecomputePolicy policy;
  for (const std::string& op : DefaultRecomputableOps()) policy.ops.insert(NormalizeOpName(op));
  return policy;
}

RecomputePolicy ParseRecomputePolicy(std::string_view text, const std::string& source) {
  RecomputePolicy policy;
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::string entry = Trim(std::string_view(line).substr(0, line.find('#')));
    if (entry.empty()) continue;
    if (entry == "+default") {
      for (const std::string& op : DefaultRecomputableOps()) {
        policy.ops.insert(NormalizeOpName(op));
      }
      continue;
    }
    if (!ValidOpName(entry)) {
      throw InputError(source + ":" + std::to_string(number) + ": '" + entry +
                       "' is not an op name (expected one name per line: letters, digits, "
                       "'_', '.', ':', '-')");
    }
    policy.ops.insert(NormalizeOpName(entry));
  }
  return policy;
}

RecomputePolicy ReadRecomputePolicy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot read the recompute policy file");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseRecomputePolicy(text.str(), path);
}

RecomputePolicy MakeRecomputePolicy(const std::string& policy_path, const std::string& extra_ops) {
  RecomputePolicy policy =
      policy_path.empty() ? DefaultRecomputePolicy() : ReadRecomputePolicy(policy_path);
  std::istringstream items(extra_ops);
  std::string item;
  while (std::getline(items, item, ',')) {
    std::string op = Trim(item);
    if (op.empty()) continue;
    if (!ValidOpName(op)) {
      throw InputError("recomputable op '" + op + "' is not an op name", kExitUsage);
    }
    policy.ops.insert(NormalizeOpName(op));
  }
  return policy;
}

}  // namespace ckptplan
