// Reading whole input files.
#ifndef CKPTPLAN_FILE_IO_H_
#define CKPTPLAN_FILE_IO_H_

#include <string>

namespace ckptplan {

/// Reads a whole file (a regular file in one allocation of its size, a pipe
/// in pieces); throws IoError naming `path` on failure.
std::string ReadFile(const std::string& path);

}  // namespace ckptplan

#endif  // CKPTPLAN_FILE_IO_H_
