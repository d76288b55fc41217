#include "core/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/crash_point.h"
#include "core/error.h"

namespace define {

void write_file_atomically(const std::string& path, const std::string& bytes) {
  const char* op = "write_file_atomically";
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string tmp = (dir / fmt::format(".{}.tmp.{}", target.filename().string(), ::getpid())).string();
  // Every failure names the file the caller asked for and says that the old one is untouched: a
  // full disk or a file-size limit (EFBIG, ENOSPC) must read as "the checkpoint was not written",
  // not as a problem with some hidden temporary.
  auto give_up = [&](const char* what, int err) {
    ::unlink(tmp.c_str());
    fail(op, "could not write '{}' ({} its temporary '{}': {}); the previous '{}', if any, is unchanged", path, what,
         tmp, std::strerror(err), target.filename().string());
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) give_up("creating", errno);
  auto write_range = [&](std::size_t from, std::size_t to) {
    while (from < to) {
      const ssize_t n = ::write(fd, bytes.data() + from, to - from);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : EIO;
        ::close(fd);
        give_up("writing", err);
      }
      from += static_cast<std::size_t>(n);
    }
  };
  write_range(0, bytes.size() / 2);
  crash_point("atomic_write");  // a test's SIGKILL here leaves a half-written temporary
  write_range(bytes.size() / 2, bytes.size());
  // The data must be on disk before the rename makes it visible under the final name.
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    give_up("flushing", err);
  }
  if (::close(fd) != 0) give_up("closing", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) give_up("renaming", errno);
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

int remove_stale_temporaries(const std::string& dir) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    // ".<name>.tmp.<pid>", the names write_file_atomically uses.
    const std::string name = e.path().filename().string();
    const std::size_t at = name.rfind(".tmp.");
    if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at == 0) continue;
    const std::string pid_text = name.substr(at + 5);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    // A live writer (this process, or another still running) keeps its file.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm_ec;
    if (fs::remove(e.path(), rm_ec)) ++removed;
  }
  return removed;
}

}  // namespace define
