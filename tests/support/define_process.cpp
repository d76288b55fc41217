#include "support/define_process.h"

#include <csignal>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"

extern "C" char** environ;

namespace define::test {
namespace {

int decode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }

}  // namespace

DefineProcess::DefineProcess(const std::vector<std::string>& args, const std::filesystem::path& log,
                             const ProcessOptions& opt) {
  std::vector<std::string> argv_s = {DEFINE_CLI_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s;
  std::vector<std::string> added = opt.env;
  if (!opt.crash_at.empty()) added.push_back("DEFINE_CRASH_AT=" + opt.crash_at);
  auto replaced = [&](const std::string& entry) {
    if (entry.rfind("DEFINE_CRASH_AT=", 0) == 0) return true;  // never inherited from the test's own environment
    for (const std::string& a : added)
      if (entry.compare(0, a.find('=') + 1, a, 0, a.find('=') + 1) == 0) return true;
    return false;
  };
  for (char** e = environ; *e; ++e)
    if (!replaced(*e)) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), added.begin(), added.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log_path = log.string();
  rlimit limit{};
  getrlimit(RLIMIT_FSIZE, &limit);
  if (opt.file_size_limit) limit.rlim_cur = opt.file_size_limit;
  // Between fork and exec only async-signal-safe calls: everything is prepared above.
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    if (opt.file_size_limit) {
      signal(SIGXFSZ, SIG_IGN);
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (pid_ < 0) fail("DefineProcess", "fork failed");
}

int DefineProcess::wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  return decode(status);
}

bool DefineProcess::finished(int& status) {
  int s = 0;
  if (waitpid(pid_, &s, WNOHANG) != pid_) return false;
  status = decode(s);
  return true;
}

void DefineProcess::kill9() { ::kill(pid_, SIGKILL); }

}  // namespace define::test
