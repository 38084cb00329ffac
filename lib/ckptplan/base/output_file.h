// Writing output files so that a failed or killed run never leaves a
// half-written file: write a temp file beside the target, then rename.
#ifndef CKPTPLAN_OUTPUT_FILE_H_
#define CKPTPLAN_OUTPUT_FILE_H_

#include <string>
#include <string_view>

namespace ckptplan {

/// Replaces `path` with `content` atomically. On failure the previous file is
/// intact, no temp file is left, and IoError names `path`. The temp file is
/// unnamed (O_TMPFILE) until it is complete, so even a killed run leaves none
/// where the filesystem supports that. Test hooks: the environment variable
/// CKPTPLAN_FAIL_WRITE_AFTER=N fails the write (ENOSPC) after N bytes;
/// CKPTPLAN_KILL_WRITE_AFTER=N sends the process SIGKILL there.
void WriteFileAtomic(const std::string& path, std::string_view content);

}  // namespace ckptplan

#endif  // CKPTPLAN_OUTPUT_FILE_H_
