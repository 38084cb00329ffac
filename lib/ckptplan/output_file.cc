#include "ckptplan/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "ckptplan/errors.h"

namespace ckptplan {
namespace {

[[noreturn]] void Fail(const std::string& path, const std::string& what, int error) {
  throw IoError(path + ": cannot write file: " + what + ": " + std::strerror(error));
}

}  // namespace

void WriteFileAtomic(const std::string& path, std::string_view content) {
  std::string pattern = path + ".tmp.XXXXXX";
  std::vector<char> temp(pattern.begin(), pattern.end());
  temp.push_back('\0');
  int fd = mkstemp(temp.data());
  if (fd < 0) Fail(path, "creating a temp file beside it", errno);
  const std::string temp_path(temp.data());
  auto abandon = [&](const char* what) {
    int error = errno;
    close(fd);
    unlink(temp_path.c_str());
    Fail(path, what, error);
  };
  // mkstemp creates 0600; output files get the usual 0666 & ~umask.
  mode_t mask = umask(0);
  umask(mask);
  if (fchmod(fd, 0666 & ~mask) != 0) abandon("setting permissions");
  size_t written = 0;
  while (written < content.size()) {
    ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("writing");
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) abandon("syncing");
  if (close(fd) != 0) {
    int error = errno;
    unlink(temp_path.c_str());
    Fail(path, "closing", error);
  }
  if (std::rename(temp_path.c_str(), path.c_str()) != 0) {
    int error = errno;
    unlink(temp_path.c_str());
    Fail(path, "renaming the temp file over it", error);
  }
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace ckptplan
