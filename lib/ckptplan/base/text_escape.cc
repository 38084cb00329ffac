#include "ckptplan/base/text_escape.h"

#include <cstdint>

namespace ckptplan {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendHex(std::string& out, const char* prefix, uint32_t value, int digits) {
  out += prefix;
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += kHex[(value >> shift) & 15];
}

// Bytes of the valid UTF-8 sequence starting at text[i], or 0 (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF).
size_t Utf8Length(std::string_view text, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length;
  uint32_t value;
  unsigned char low = 0x80, high = 0xbf;  // bounds of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, value = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, value = lead & 0x0f;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, value = lead & 0x07;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const unsigned char next = byte(i + k);
    if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xbf)) return 0;
    value = (value << 6) | (next & 0x3f);
  }
  *code_point = value;
  return length;
}

std::string Escape(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f) {
      out += text[i++];
    } else if (byte == '\n') {
      out += keep_newlines ? "\n" : "\\n";
      ++i;
    } else if (byte == '\t' || byte == '\r') {
      out += byte == '\t' ? "\\t" : "\\r";
      ++i;
    } else if (byte < 0x80) {  // the rest of C0, and DEL
      AppendHex(out, "\\x", byte, 2);
      ++i;
    } else {
      uint32_t code_point = 0;
      const size_t length = Utf8Length(text, i, &code_point);
      if (length == 0) {
        AppendHex(out, "\\x", byte, 2);
        ++i;
      } else if (code_point <= 0x9f) {  // C1
        AppendHex(out, "\\u", code_point, 4);
        i += length;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
    }
  }
  return out;
}

}  // namespace

std::string ShowName(std::string_view name) { return Escape(name, false); }

std::string EscapeControls(std::string_view text) { return Escape(text, true); }

}  // namespace ckptplan
