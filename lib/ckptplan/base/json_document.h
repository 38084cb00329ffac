// Small JSON documents read whole: plans, configs, the graph reader's
// fallback for documents it cannot stream.
#ifndef CKPTPLAN_JSON_DOCUMENT_H_
#define CKPTPLAN_JSON_DOCUMENT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ckptplan/base/limits.h"

namespace ckptplan {

/// Parses `text` as one JSON document after the nesting-depth pre-scan
/// (CheckJsonDepth with `max_depth`), turning nlohmann's exceptions into
/// InputError ("SOURCE: malformed JSON at byte N: ...").
nlohmann::json ParseJsonDocument(std::string_view text, const std::string& source,
                                 uint32_t max_depth = Limits().max_depth);

}  // namespace ckptplan

#endif  // CKPTPLAN_JSON_DOCUMENT_H_
