#include "ckptplan/ir/scope.h"

#include <algorithm>

namespace ckptplan {
namespace {

bool IsSeparator(char c) { return c == '/' || c == '.'; }

bool IsDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string ScopeLayer(std::string_view scope) {
  size_t end = 0;        // end of the deepest numbered component found
  bool named = false;    // a name component came before
  size_t begin = 0;
  while (begin <= scope.size()) {
    size_t stop = begin;
    while (stop < scope.size() && !IsSeparator(scope[stop])) ++stop;
    const std::string_view part = scope.substr(begin, stop - begin);
    if (!part.empty()) {
      if (named && IsDigits(part)) end = stop;
      named |= !IsDigits(part);
    }
    begin = stop + 1;
  }
  return std::string(scope.substr(0, end));
}

std::string ScopeBlock(std::string_view scope) {
  std::string layer = ScopeLayer(scope);
  if (!layer.empty()) return layer;
  const size_t first = scope.find_first_of("./");
  return std::string(scope.substr(0, first));
}

bool ScopeInside(std::string_view scope, std::string_view root) {
  if (root.empty()) return true;
  return scope == root || (scope.size() > root.size() && scope.substr(0, root.size()) == root &&
                           scope[root.size()] == '/');
}

namespace {

std::vector<std::string> Split(std::string_view scope, std::string_view separators) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= scope.size()) {
    size_t stop = scope.find_first_of(separators, begin);
    if (stop == std::string_view::npos) stop = scope.size();
    if (stop > begin) parts.emplace_back(scope.substr(begin, stop - begin));
    begin = stop + 1;
  }
  return parts;
}

}  // namespace

std::vector<std::string> SplitScope(std::string_view scope) { return Split(scope, "/"); }

std::vector<std::string> ScopeComponents(std::string_view scope) { return Split(scope, "/."); }

}  // namespace ckptplan
