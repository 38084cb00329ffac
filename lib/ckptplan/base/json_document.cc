#include "ckptplan/base/json_document.h"

#include "ckptplan/base/errors.h"

namespace ckptplan {

nlohmann::json ParseJsonDocument(std::string_view text, const std::string& source,
                                 uint32_t max_depth) {
  using nlohmann::json;
  CheckJsonDepth(text, max_depth, source);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw InputError(source + ": malformed JSON at byte " + std::to_string(e.byte) + ": " +
                     e.what());
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    throw InputError(source + ": malformed JSON: " + e.what());
  }
}

}  // namespace ckptplan
