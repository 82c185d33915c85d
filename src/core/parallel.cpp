#include "core/parallel.hpp"

#if defined(__linux__)
#include <sched.h>
#endif

namespace hm::core {

int usable_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace hm::core
