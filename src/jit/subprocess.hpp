// Running a program without a shell (posix_spawn), capturing stdout and stderr together.
#pragma once

#include <string>
#include <vector>

namespace hm::jit {

struct ProcessResult {
  bool exited = false;           // false when it was killed by a signal
  int exit_code = -1;            // valid when exited
  std::string output;            // stdout and stderr, interleaved as written
  std::string describe() const;  // "exit code 1" / "killed by signal 9"
};

// argv[0] must be a path to the executable (no PATH search). Throws HM_ERROR_IO when the
// process cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv);

}  // namespace hm::jit
