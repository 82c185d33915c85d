// GPU architectures as a value: compute capability plus the target suffix. One parser and one
// printer for every spelling users and tools write ("sm_90a", "sm90a", "90a", "compute_90a",
// "9.0"), shared by the support rules (core) and the runtime's device naming.
#pragma once

#include <string>
#include <vector>

namespace hm::core {

struct Arch {
  int major = 0;
  int minor = 0;
  // 'a': arch-specific features (wgmma, tcgen05, the fp4 mma.sync...), runs only on exactly this
  // compute capability; 'f': family-specific (sm_100f runs on 10.x devices from 10.0 on, sm_120f
  // on 12.x), carries the same instructions as 'a' for the family; '\0': plain, forward compatible.
  char suffix = '\0';

  int compute_capability() const { return major * 10 + minor; }  // 90 for 9.0
  bool has_specific_features() const { return suffix == 'a' || suffix == 'f'; }
  std::string name() const;          // "sm_90a": the real target (cubin)
  std::string virtual_name() const;  // "compute_90a": the virtual target (PTX)

  friend bool operator==(const Arch& a, const Arch& b) {
    return a.major == b.major && a.minor == b.minor && a.suffix == b.suffix;
  }
  friend bool operator!=(const Arch& a, const Arch& b) { return !(a == b); }
};

// The target to compile for on a device of this compute capability: the arch-specific variant
// where one exists (sm_90a, sm_100a, sm_101a, sm_103a, sm_110a, sm_120a, sm_121a), else the
// plain one (sm_75, sm_80, sm_86, sm_89...). Throws HM_ERROR_INVALID_ARGUMENT for a nonsense cc.
Arch native_arch(int cc_major, int cc_minor);

// Parses "sm_90a", "SM_90A", "sm90a", "90a", "compute_90a", "sm_100f", "sm_120", "8.6", "9.0a".
// The number is the compute capability with its last digit as the minor version (90 -> 9.0,
// 121 -> 12.1). Throws hm::Error(HM_ERROR_PARSE) naming the text and the accepted forms.
Arch parse_arch(const std::string& text);

// The targets the compile matrix covers, oldest first (each with its native suffix). The support
// rules answer "is this format supported on any architecture?" against this list.
const std::vector<Arch>& known_archs();

}  // namespace hm::core
