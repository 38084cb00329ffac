#include "ckptplan/ci/check_config.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/file_io.h"
#include "ckptplan/base/json_document.h"
#include "ckptplan/base/problems.h"
#include "ckptplan/base/size.h"
#include "ckptplan/emit/plan_io.h"

namespace ckptplan {

using nlohmann::json;

int64_t Tolerance::Allowed(int64_t baseline_peak) const {
  if (!is_percent) return bytes;
  long double allowed = static_cast<long double>(baseline_peak) * percent / 100.0L;
  if (allowed >= static_cast<long double>(INT64_MAX)) return INT64_MAX;
  return static_cast<int64_t>(std::floor(allowed));
}

std::string Tolerance::ToString() const {
  if (!is_percent) return FormatBytes(bytes);
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%g%%", percent);
  return buffer;
}

Tolerance ParseTolerance(std::string_view text, std::string_view what) {
  Tolerance tolerance;
  if (text.empty() || text.back() != '%') {
    tolerance.bytes = ParseSize(text, what);
    return tolerance;
  }
  std::string number(text.substr(0, text.size() - 1));
  char* end = nullptr;
  errno = 0;
  double percent = std::strtod(number.c_str(), &end);
  bool ok = !number.empty() && end == number.c_str() + number.size() && errno == 0 &&
            std::isfinite(percent) && percent >= 0 &&
            number.find_first_not_of("0123456789.") == std::string::npos;
  if (!ok) {
    throw InputError(std::string(what) + ": cannot read '" + std::string(text) +
                         "' as a tolerance (expected a percentage like 2% or a size like "
                         "256MiB)",
                     kExitUsage);
  }
  tolerance.is_percent = true;
  tolerance.percent = percent;
  return tolerance;
}

namespace {

std::string Resolve(const std::string& folder, const std::string& path) {
  if (folder.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(folder) / path).lexically_normal().string();
}

// A size is a string ("40GiB") or an integer number of bytes.
std::optional<int64_t> ReadSize(const json& object, const char* key, const std::string& where,
                                Problems* problems) {
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  std::string what = where + ": \"" + key + "\"";
  if (it->is_number_integer() && it->get<int64_t>() >= 0) return it->get<int64_t>();
  if (!it->is_string()) {
    problems->Add(what + " must be a size like \"40GiB\" or a byte count, got " + it->dump());
    return std::nullopt;
  }
  try {
    return ParseSize(it->get<std::string>(), what);
  } catch (const InputError& e) {
    problems->Add(e.what());
    return std::nullopt;
  }
}

CheckSettings ReadSettings(const json& object, const std::string& where, Problems* problems) {
  CheckSettings settings;
  settings.budget_bytes = ReadSize(object, "budget", where, problems);
  settings.reserve_bytes = ReadSize(object, "reserve", where, problems);
  if (auto it = object.find("tolerance"); it != object.end()) {
    std::string what = where + ": \"tolerance\"";
    if (it->is_number_integer() && it->get<int64_t>() >= 0) {
      settings.tolerance = Tolerance{false, 0, it->get<int64_t>()};
    } else if (!it->is_string()) {
      problems->Add(what + " must be like \"2%\" or \"256MiB\", got " + it->dump());
    } else {
      try {
        settings.tolerance = ParseTolerance(it->get<std::string>(), what);
      } catch (const InputError& e) {
        problems->Add(e.what());
      }
    }
  }
  if (auto it = object.find("load"); it != object.end()) {
    settings.load = ParseLoadJson(*it, where + ": \"load\".", problems);
  }
  if (auto it = object.find("no_plan"); it != object.end()) {
    if (it->is_boolean()) {
      settings.no_plan = it->get<bool>();
    } else {
      problems->Add(where + ": \"no_plan\" must be true or false, got " + it->dump());
    }
  }
  return settings;
}

void CheckKeys(const json& object, std::initializer_list<const char*> known,
               const std::string& where, Problems* problems) {
  for (auto& [key, value] : object.items()) {
    bool found = false;
    for (const char* name : known) found |= key == name;
    if (!found) problems->Add(where + ": unknown key \"" + key + "\"");
  }
}

void ReadGraphs(const json& root, const std::string& folder, Problems* problems,
                CheckConfig* config) {
  auto graphs = root.find("graphs");
  if (graphs == root.end() || !graphs->is_array() || graphs->empty()) {
    problems->Add("\"graphs\" must be a non-empty array of {\"graph\": PATH, ...}");
    return;
  }
  for (size_t i = 0; i < graphs->size(); ++i) {
    const json& entry = (*graphs)[i];
    std::string where = "graphs[" + std::to_string(i) + "]";
    if (!entry.is_object()) {
      problems->Add(where + " must be an object, got " + entry.dump());
      continue;
    }
    CheckKeys(entry, {"graph", "key", "budget", "reserve", "tolerance", "no_plan", "load"}, where,
              problems);
    ConfigGraph graph;
    auto path = entry.find("graph");
    if (path == entry.end() || !path->is_string() || path->get<std::string>().empty()) {
      problems->Add(where + ": \"graph\" must be a non-empty path string");
      continue;
    }
    graph.graph = path->get<std::string>();
    graph.path = Resolve(folder, graph.graph);
    where = "graph '" + graph.graph + "'";
    if (auto key = entry.find("key"); key != entry.end()) {
      if (key->is_string() && !key->get<std::string>().empty()) {
        graph.key = key->get<std::string>();
      } else {
        problems->Add(where + ": \"key\" must be a non-empty string, got " + key->dump());
      }
    }
    graph.settings = ReadSettings(entry, where, problems);
    config->graphs.push_back(std::move(graph));
  }
}

}  // namespace

CheckConfig ParseCheckConfig(std::string_view text, const std::string& source,
                             const std::string& folder) {
  const json root = ParseJsonDocument(text, source);
  Problems problems(source);
  CheckConfig config;
  if (!root.is_object()) {
    problems.Add("top level must be a JSON object, got " + root.dump());
    problems.ThrowIfAny();
  }
  CheckKeys(root, {"format", "version", "baseline", "defaults", "graphs"}, "top level", &problems);
  if (root.value("format", json()) != "ckptplan.check") {
    problems.Add("\"format\" must be \"ckptplan.check\", got " +
                 (root.contains("format") ? root["format"].dump() : std::string("nothing")));
  }
  if (root.value("version", json()) != 1) {
    problems.Add("\"version\" must be 1, got " +
                 (root.contains("version") ? root["version"].dump() : std::string("nothing")));
  }
  if (auto baseline = root.find("baseline"); baseline != root.end()) {
    if (baseline->is_string() && !baseline->get<std::string>().empty()) {
      config.baseline_path = Resolve(folder, baseline->get<std::string>());
    } else {
      problems.Add("\"baseline\" must be a non-empty path string, got " + baseline->dump());
    }
  }
  if (auto defaults = root.find("defaults"); defaults != root.end()) {
    if (defaults->is_object()) {
      CheckKeys(*defaults, {"budget", "reserve", "tolerance", "no_plan", "load"}, "defaults",
                &problems);
      config.defaults = ReadSettings(*defaults, "defaults", &problems);
    } else {
      problems.Add("\"defaults\" must be an object, got " + defaults->dump());
    }
  }
  ReadGraphs(root, folder, &problems, &config);
  problems.ThrowIfAny();
  return config;
}

CheckConfig ReadCheckConfig(const std::string& path) {
  std::string folder = std::filesystem::path(path).parent_path().string();
  return ParseCheckConfig(ReadFile(path), path, folder);
}

}  // namespace ckptplan
