#include "ckptplan/cli/flags.h"

#include <algorithm>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

int64_t ParseDimValue(const std::string& text, const std::string& flag, const std::string& arg) {
  size_t used = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value <= 0) {
    throw InputError(flag + " " + arg + ": '" + text + "' is not a positive integer", kExitUsage);
  }
  return value;
}

template <typename T>
std::string NameList(const std::vector<T>& all) {
  std::string names;
  for (const T& value : all) names += (names.empty() ? "" : ", ") + std::string(ToString(value));
  return names;
}

std::string DeviceNames() {
  std::string names;
  for (const DeviceSpec* device : AllDevices()) {
    names += (names.empty() ? "" : ", ") + std::string(device->name);
  }
  return names;
}

// CLI11 reports a callback's CLI::ValidationError as a usage error.
template <typename Parse>
void AsValidation(Parse parse) {
  try {
    parse();
  } catch (const InputError& e) {
    throw CLI::ValidationError(std::string(e.what()));  // the message names `flag`
  }
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text;
}

std::string FrozenText(const std::vector<std::string>& frozen) {
  std::string text;
  for (const std::string& glob : frozen) text += (text.empty() ? "" : ",") + glob;
  return text.empty() ? "(none)" : text;
}

}  // namespace

double ParseMaxErrorFlag(const std::string& arg) {
  const bool percent = !arg.empty() && arg.back() == '%';
  const std::string number = percent ? arg.substr(0, arg.size() - 1) : arg;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || errno != 0 ||
      !std::isfinite(value) || value < 0 ||
      number.find_first_not_of("0123456789.eE-+") != std::string::npos) {
    throw InputError("--max-error: cannot read '" + arg +
                         "' as an error bound (expected a fraction like 0.01 or a percentage "
                         "like 1%)",
                     kExitUsage);
  }
  return percent ? value / 100.0 : value;
}

std::pair<std::string, int64_t> ParseDimFlag(const std::string& arg) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError("--dim " + arg + ": expected NAME=VALUE, e.g. --dim batch=8", kExitUsage);
  }
  return {arg.substr(0, eq), ParseDimValue(arg.substr(eq + 1), "--dim", arg)};
}

std::pair<std::string, std::vector<int64_t>> ParseInputShapeFlag(const std::string& arg) {
  size_t colon = arg.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == arg.size()) {
    throw InputError("--input-shape " + arg + ": expected NAME:AxB..., e.g. input_ids:8x4096",
                     kExitUsage);
  }
  std::vector<int64_t> shape;
  std::string rest = arg.substr(colon + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t x = rest.find('x', start);
    if (x == std::string::npos) x = rest.size();
    shape.push_back(ParseDimValue(rest.substr(start, x - start), "--input-shape", arg));
    start = x + 1;
  }
  return {arg.substr(0, colon), shape};
}

void AddLoadFlags(CLI::App* command, LoadFlags* flags) {
  command->add_option_function<std::vector<std::string>>(
      "--dim",
      [flags](const std::vector<std::string>& args) {
        for (const std::string& arg : args) {
          AsValidation([&] {
            auto [name, value] = ParseDimFlag(arg);
            flags->dims.insert_or_assign(name, value);
          });
        }
      },
      "ONNX: bind a symbolic dim, e.g. --dim seq=4096 (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option_function<std::vector<std::string>>(
      "--input-shape",
      [flags](const std::vector<std::string>& args) {
        for (const std::string& arg : args) {
          AsValidation([&] {
            auto [name, shape] = ParseInputShapeFlag(arg);
            flags->input_shapes.insert_or_assign(name, shape);
          });
        }
      },
      "ONNX: shape of a graph input, e.g. input_ids:8x4096 (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option_function<std::vector<std::string>>(
      "--frozen", [flags](const std::vector<std::string>& globs) { flags->frozen = globs; },
      "ONNX: initializers (glob) that are not trained (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option_function<std::string>(
      "--precision",
      [flags](const std::string& name) {
        Precision value;
        if (!ParsePrecision(name, &value)) {
          throw CLI::ValidationError("--precision", "unknown precision '" + name + "' (expected " +
                                                        NameList(AllPrecisions()) + ")");
        }
        flags->precision = value;
      },
      "ONNX: " + NameList(AllPrecisions()) + " (default fp32)");
  command->add_option_function<std::string>(
      "--optimizer",
      [flags](const std::string& name) {
        Optimizer value;
        if (!ParseOptimizer(name, &value)) {
          throw CLI::ValidationError("--optimizer", "unknown optimizer '" + name + "' (expected " +
                                                        NameList(AllOptimizers()) + ")");
        }
        flags->optimizer = value;
      },
      "ONNX: " + NameList(AllOptimizers()) + " (default adamw)");
  command->add_option_function<std::string>(
      "--device",
      [flags](const std::string& name) {
        flags->device = LookupDevice(name);
        if (!flags->device) {
          throw CLI::ValidationError("--device", "unknown device '" + name + "' (expected " +
                                                     DeviceNames() + ")");
        }
      },
      "ONNX: roofline preset: " + DeviceNames() + " (default h100)");
  command->add_option_function<std::string>(
      "--optimizer-impl",
      [flags](const std::string& name) {
        OptimizerImpl value;
        if (!ParseOptimizerImpl(name, &value)) {
          throw CLI::ValidationError("--optimizer-impl", "unknown implementation '" + name +
                                                             "' (expected " +
                                                             NameList(AllOptimizerImpls()) + ")");
        }
        flags->optimizer_impl = value;
      },
      "ONNX: " + NameList(AllOptimizerImpls()) + " (default: PyTorch's pick for --device)");
  command->add_option_function<std::string>(
      "--loss",
      [flags](const std::string& name) {
        LossKind value;
        if (!ParseLossKind(name, &value)) {
          throw CLI::ValidationError("--loss", "unknown loss '" + name + "' (expected " +
                                                   NameList(AllLossKinds()) + ")");
        }
        flags->loss = value;
      },
      "ONNX: append a loss to a graph that ends at logits: " + NameList(AllLossKinds()));
  command->add_option_function<int>(
      "--dropout-mask-bytes", [flags](int bytes) { flags->dropout_mask_bytes = bytes; },
      "ONNX: bytes per Dropout mask element: 1 (native_dropout, default) or 4")
      ->check(CLI::IsMember({1, 4}));
  Limits& limits = flags->limits;
  limits.max_nodes_hint = "raise it with --max-nodes";
  limits.max_tensors_hint = "raise it with --max-tensors";
  limits.max_depth_hint = "raise the limit with --max-depth";
  command->add_option("--max-nodes", limits.max_nodes, "Reject graphs with more nodes")
      ->capture_default_str();
  command->add_option("--max-tensors", limits.max_tensors, "Reject graphs with more tensors")
      ->capture_default_str();
  command->add_option("--max-depth", limits.max_depth,
                      "Reject JSON nested deeper (and ONNX subgraphs deeper)")
      ->capture_default_str();
}

LoadOptions ResolveLoad(const LoadFlags& flags, const std::optional<LoadOptions>& recorded,
                        std::vector<std::string>* conflicts) {
  LoadOptions load = recorded.value_or(LoadOptions{});
  load.limits = flags.limits;
  load.loss_hint =
      "pass --loss cross-entropy or --loss mean to append one (--loss none to train on the "
      "output as it is)";
  auto conflict = [&](const std::string& given, const std::string& was) {
    if (recorded && conflicts) conflicts->push_back(given + " overrides " + was + " recorded in the plan");
  };
  for (const auto& [name, value] : flags.dims) {
    auto it = load.dims.find(name);
    if (it != load.dims.end() && it->second != value) {
      conflict("--dim " + name + "=" + std::to_string(value),
               name + "=" + std::to_string(it->second));
    }
    load.dims[name] = value;
  }
  for (const auto& [name, shape] : flags.input_shapes) {
    auto it = load.input_shapes.find(name);
    if (it != load.input_shapes.end() && it->second != shape) {
      conflict("--input-shape " + name + ":" + ShapeText(shape),
               name + ":" + ShapeText(it->second));
    }
    load.input_shapes[name] = shape;
  }
  if (flags.frozen) {
    if (*flags.frozen != load.frozen) {
      conflict("--frozen " + FrozenText(*flags.frozen), "frozen " + FrozenText(load.frozen));
    }
    load.frozen = *flags.frozen;
  }
  if (flags.precision) {
    if (*flags.precision != load.precision) {
      conflict("--precision " + std::string(ToString(*flags.precision)),
               "precision " + std::string(ToString(load.precision)));
    }
    load.precision = *flags.precision;
  }
  if (flags.optimizer) {
    if (*flags.optimizer != load.optimizer) {
      conflict("--optimizer " + std::string(ToString(*flags.optimizer)),
               "optimizer " + std::string(ToString(load.optimizer)));
    }
    load.optimizer = *flags.optimizer;
  }
  if (flags.device) {
    if (flags.device != load.device) {
      conflict("--device " + std::string(flags.device->name),
               "device " + std::string(load.device->name));
    }
    load.device = flags.device;
  }
  if (flags.optimizer_impl) {
    if (load.optimizer_impl && *flags.optimizer_impl != *load.optimizer_impl) {
      conflict("--optimizer-impl " + std::string(ToString(*flags.optimizer_impl)),
               "optimizer impl " + std::string(ToString(*load.optimizer_impl)));
    }
    load.optimizer_impl = flags.optimizer_impl;
  }
  if (flags.loss) {
    if (load.loss && *flags.loss != *load.loss) {
      conflict("--loss " + std::string(ToString(*flags.loss)),
               "loss " + std::string(ToString(*load.loss)));
    }
    load.loss = flags.loss;
  }
  if (flags.dropout_mask_bytes) {
    if (*flags.dropout_mask_bytes != load.dropout_mask_bytes) {
      conflict("--dropout-mask-bytes " + std::to_string(*flags.dropout_mask_bytes),
               "dropout mask bytes " + std::to_string(load.dropout_mask_bytes));
    }
    load.dropout_mask_bytes = *flags.dropout_mask_bytes;
  }
  return load;
}

std::string LoadErrorHint(const UnresolvedShapesError& error) {
  std::string hint;
  for (const std::string& dim : error.unbound_dims) hint += " --dim " + dim + "=N";
  for (const std::string& input : error.unshaped_inputs) hint += " --input-shape " + input + ":AxB...";
  return hint.empty() ? "" : "bind the graph inputs with" + hint;
}

std::string CheckFlagName(const std::string& field) {
  std::string flag = field;
  const std::string path = "_path";  // baseline_path -> --baseline
  if (flag.size() > path.size() && flag.compare(flag.size() - path.size(), path.size(), path) == 0) {
    flag.resize(flag.size() - path.size());
  }
  std::replace(flag.begin(), flag.end(), '_', '-');
  return "--" + flag;
}

}  // namespace ckptplan
