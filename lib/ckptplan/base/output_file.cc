#include "ckptplan/base/output_file.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

[[noreturn]] void Fail(const std::string& path, const std::string& what, int error) {
  throw IoError(path + ": cannot write file: " + what + ": " + std::strerror(error));
}

// Test hooks, documented in docs/hardening.md: CKPTPLAN_FAIL_WRITE_AFTER=N makes the
// write fail (as ENOSPC) once N bytes are written; CKPTPLAN_KILL_WRITE_AFTER=N
// kills the process with SIGKILL there, as a crash or an OOM kill would.
// -1 when unset.
int64_t HookBytes(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return -1;
  return std::max<int64_t>(0, std::strtoll(value, nullptr, 10));
}

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// An open temp file in the target's directory. With O_TMPFILE it has no name
// until Publish, so a killed run leaves nothing behind; elsewhere it is a
// mkstemp file that failures unlink.
struct TempFile {
  int fd = -1;
  std::string name;  // empty while unnamed (O_TMPFILE)
};

TempFile OpenTemp(const std::string& path) {
  TempFile temp;
  temp.fd = open(DirectoryOf(path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (temp.fd >= 0) return temp;
  std::string pattern = path + ".tmp.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  temp.fd = mkstemp(buffer.data());
  if (temp.fd < 0) Fail(path, "creating a temp file beside it", errno);
  temp.name = buffer.data();
  // mkstemp creates 0600; output files get the usual 0666 & ~umask.
  mode_t mask = umask(0);
  umask(mask);
  if (fchmod(temp.fd, 0666 & ~mask) != 0) {
    int error = errno;
    close(temp.fd);
    unlink(temp.name.c_str());
    Fail(path, "setting permissions", error);
  }
  return temp;
}

// Gives an unnamed temp file a unique name beside `path`; false with errno set.
bool NameTemp(const std::string& path, TempFile& temp) {
  const std::string fd_path = "/proc/self/fd/" + std::to_string(temp.fd);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(attempt);
    if (linkat(AT_FDCWD, fd_path.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      temp.name = std::move(name);
      return true;
    }
    if (errno != EEXIST) return false;
  }
  return false;
}

}  // namespace

void WriteFileAtomic(const std::string& path, std::string_view content) {
  TempFile temp = OpenTemp(path);
  auto abandon = [&](const char* what, int error) {
    if (temp.fd >= 0) close(temp.fd);
    if (!temp.name.empty()) unlink(temp.name.c_str());
    Fail(path, what, error);
  };
  const int64_t fail_after = HookBytes("CKPTPLAN_FAIL_WRITE_AFTER");
  const int64_t kill_after = HookBytes("CKPTPLAN_KILL_WRITE_AFTER");
  size_t written = 0;
  while (written < content.size()) {
    size_t chunk = content.size() - written;
    for (int64_t hook : {fail_after, kill_after}) {
      if (hook < 0) continue;
      if (written >= static_cast<uint64_t>(hook)) {
        if (hook == kill_after) raise(SIGKILL);
        abandon("writing", ENOSPC);
      }
      chunk = std::min(chunk, static_cast<size_t>(hook) - written);
    }
    ssize_t n = write(temp.fd, content.data() + written, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("writing", errno);
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(temp.fd) != 0) abandon("syncing", errno);
  if (temp.name.empty() && !NameTemp(path, temp)) abandon("naming the temp file", errno);
  int fd = temp.fd;
  temp.fd = -1;
  if (close(fd) != 0) abandon("closing", errno);
  if (std::rename(temp.name.c_str(), path.c_str()) != 0) {
    abandon("renaming the temp file over it", errno);
  }
}

}  // namespace ckptplan
