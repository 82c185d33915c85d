#include "jit/subprocess.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

extern char** environ;

namespace hm::jit {

std::string ProcessResult::describe() const {
  if (exited) return "exit code " + std::to_string(exit_code);
  return "killed by signal " + std::to_string(exit_code);
}

ProcessResult run_process(const std::vector<std::string>& argv) {
  HM_REQUIRE(!argv.empty(), HM_ERROR_INTERNAL, "run_process: empty argv");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  // O_CLOEXEC keeps the pipe out of processes other threads may spawn at the same time; dup2 in
  // the child clears the flag on its stdout/stderr copies.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    fail(HM_ERROR_IO,
         std::string("creating a pipe for '") + argv[0] + "' failed: " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    fail(HM_ERROR_IO, "starting '" + argv[0] + "' failed: " + std::strerror(rc));
  }

  ProcessResult result;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
    if (n > 0) {
      result.output.append(chunk, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      fail(HM_ERROR_IO, "waiting for '" + argv[0] + "' failed: " + std::strerror(errno));
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = WTERMSIG(status);
  }
  return result;
}

}  // namespace hm::jit
