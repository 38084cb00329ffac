#include "ckptplan/base/file_io.h"

#include <fstream>
#include <sstream>

#include "ckptplan/base/errors.h"

namespace ckptplan {

std::string ReadFile(const std::string& path) {
  // One allocation of the file's size: a stringstream would hold up to three
  // copies of a large graph at once.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IoError(path + ": cannot open file for reading");
  std::string text;
  const std::streamoff size = in.tellg();
  if (size > 0) {
    text.resize(static_cast<size_t>(size));
    in.seekg(0);
    in.read(text.data(), size);
    if (!in || in.gcount() != size) throw IoError(path + ": read failed");
  } else {
    // Not seekable (a pipe): read it in pieces.
    in.clear();
    in.seekg(0);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw IoError(path + ": read failed");
    text = buffer.str();
  }
  return text;
}

}  // namespace ckptplan
