// The wgmma kernel's A operand lives in registers that the tensor cores read asynchronously, from
// the wgmma's issue until the warp's wgmma.wait_group. To the compiler those registers are dead
// once the instruction is issued: unless the kernel pins them (ptx::fence_operand after the
// wait), ptxas may reuse them for whatever comes next, and the tensor cores then read garbage.
// Nothing warns; on the H200 it showed as wrong results for one tile only (benchmarks/NOTES.md,
// v9). This test compiles the wgmma tiles with NVRTC, disassembles them with cuobjdump and fails
// on any instruction that writes an in-flight wgmma's A registers (HGMMA: 16-bit, QGMMA: FP8,
// IGMMA: int8) before the wait that retires its group.
#include <cstdio>
#include <sys/wait.h>
#include <fstream>
#include <regex>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/format.hpp"
#include "gemm/family.hpp"
#include "jit/codegen.hpp"
#include "jit/compiler.hpp"
#include "tune/dense.hpp"

namespace {

// cuobjdump from the toolkit, or from the nvidia-cuda-cuobjdump wheel (scripts/setup.sh installs
// it: CI's toolkit image has NVRTC but not the binary utilities).
std::string find_cuobjdump() {
  for (const char* cmd :
       {"command -v cuobjdump", "ls /usr/local/cuda/bin/cuobjdump",
        "python3 -c \"import glob, nvidia; "
        "print(sorted(glob.glob(nvidia.__path__[0] + '/cu*/bin/cuobjdump'))[-1])\""}) {
    std::string out;
    if (FILE* p = popen((std::string(cmd) + " 2>/dev/null").c_str(), "r")) {
      char buf[512];
      while (fgets(buf, sizeof buf, p)) out += buf;
      pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    if (!out.empty() && out.find('\n') == std::string::npos) return out;
  }
  return "";
}

struct Output {
  std::string text;
  int status = -1;  // as pclose returns it
};

Output run(const std::string& command) {
  Output out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.text.append(buf, n);
  out.status = pclose(p);
  return out;
}

// Why a disassembly cannot be trusted, or "" when it can: the tool must have exited with 0 and
// printed no "fatal" line. cuobjdump 13.5 without nvdisasm beside it prints "cuobjdump fatal :
// Could not find executable file 'nvdisasm'", which read as SASS is a kernel with no HGMMA at
// all: the test must then fail with the tool's words, not with an instruction count.
std::string disassembly_failure(const Output& out) {
  std::string fatal;
  std::istringstream in(out.text);
  for (std::string line; std::getline(in, line);)
    if (line.find("fatal") != std::string::npos) fatal += line + "\n";
  if (!fatal.empty()) return fatal;
  if (out.status == -1) return "could not start the disassembler";
  if (!WIFEXITED(out.status) || WEXITSTATUS(out.status) != 0)
    return "the disassembler exited with status " + std::to_string(out.status) + ":\n" +
           out.text.substr(0, 2000);
  return "";
}

struct Scan {
  int hgmma = 0, waits = 0;
  std::vector<std::string> hazards;
};

// Walks the SASS in order. A wgmma (HGMMA, QGMMA, IGMMA) puts its four A registers in flight in
// the open commit group; the one marked gsb0 closes the group (wgmma.commit_group). A
// WARPGROUP.DEPBAR.LE gsb0, N (wgmma.wait_group N) retires every group but the newest N; any
// instruction whose destination overlaps a register still in flight is a hazard. Straight-line
// order is what the hardware sees within a loop body; the loop's back edge passes a wait first.
Scan scan(const std::string& sass) {
  Scan s;
  std::vector<std::set<int>> groups;  // closed groups, oldest first
  std::set<int> open;                 // the group being issued
  const std::regex line_re(R"(/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)\s*([^;]*);)");
  const std::regex reg_re(R"(\bR(\d+)\b)");
  const std::regex wait_re(R"(gsb0,\s*0x([0-9a-f]+))");
  const std::vector<std::string> no_dest = {
      "ST", "LDGSTS", "BAR", "BRA", "RED", "ATOM", "SYNCS", "UTMA", "MEMBAR", "FENCE",
      "WARPSYNC", "DEPBAR", "LDGDEPBAR", "ISETP", "UISETP", "PLOP3", "BSSY", "BSYNC", "NOP",
      "EXIT", "WARPGROUP", "FSETP", "HSETP2", "RET", "CALL", "ERRBAR", "CCTL"};
  std::istringstream in(sass);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, line_re)) continue;
    const std::string op = m[2], args = m[3];
    if (op.rfind("HGMMA", 0) == 0 || op.rfind("QGMMA", 0) == 0 || op.rfind("IGMMA", 0) == 0) {
      ++s.hgmma;
      // xGMMA.64xNxK Rd, Ra, gdesc[...], Rc: the second register is A's first of four.
      std::vector<int> regs;
      for (auto it = std::sregex_iterator(args.begin(), args.end(), reg_re);
           it != std::sregex_iterator(); ++it)
        regs.push_back(std::stoi((*it)[1]));
      if (regs.size() >= 2 && args.find("gdesc") > args.find("R" + std::to_string(regs[1])))
        for (int r = regs[1]; r < regs[1] + 4; ++r) open.insert(r);
      if (args.find("gsb0") != std::string::npos) {
        groups.push_back(open);
        open.clear();
      }
      continue;
    }
    if (op.rfind("WARPGROUP.DEPBAR", 0) == 0) {
      ++s.waits;
      if (!open.empty()) groups.push_back(open);  // a wait commits what was issued before it
      open.clear();
      std::smatch w;
      const size_t keep = std::regex_search(args, w, wait_re) ? std::stoul(w[1], nullptr, 16) : 0;
      if (groups.size() > keep) groups.erase(groups.begin(), groups.end() - keep);
      continue;
    }
    if (open.empty() && groups.empty()) continue;
    auto in_flight = [&](int r) {
      if (open.count(r)) return true;
      for (const auto& g : groups)
        if (g.count(r)) return true;
      return false;
    };
    bool skip = false;
    for (const auto& p : no_dest) skip = skip || op.rfind(p, 0) == 0;
    if (skip) continue;
    std::smatch d;
    if (!std::regex_search(args, d, std::regex(R"(^R(\d+))"))) continue;
    const int first = std::stoi(d[1]);
    const int width = op.find(".128") != std::string::npos                          ? 4
                      : (op.find(".64") != std::string::npos ||
                         op.find(".WIDE") != std::string::npos || op.rfind("CS2R", 0) == 0)
                          ? 2
                          : 1;
    for (int r = first; r < first + width; ++r)
      if (in_flight(r)) {
        s.hazards.push_back(line);
        break;
      }
  }
  return s;
}

TEST(WgmmaRegisterHazards, NoInstructionWritesTheARegistersOfAWgmmaInFlight) {
  const std::string cuobjdump = find_cuobjdump();
  ASSERT_FALSE(cuobjdump.empty())
      << "cuobjdump not found (PATH, /usr/local/cuda/bin, or the nvidia-cuda-cuobjdump wheel, "
         "which scripts/setup.sh installs)";
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  // The default tiles, and both pipelines with and without the dequantization ahead at the
  // fewest stages they allow (the tile that showed the hazard on the GPU is the 40-token one,
  // which integer wgmma cannot take: 8, 16, 24, 32, then multiples of 16 tokens).
  auto extra_tiles = [](bool forty_tokens) {
    return std::string(R"({"dense": [{"max_m": 8, "kernel": "wgmma", "block_m": 8, "warps": 4,
                                      "stages": 3, "dequant_ahead": true},)") +
           (forty_tokens ? R"({"max_m": 64, "kernel": "wgmma", "block_m": 40, "warps": 8,
                               "stages": 2, "pipeline": "mbarrier", "dequant_ahead": true},)"
                         : "") +
           R"({"max_m": 128, "kernel": "wgmma", "block_m": 128, "warps": 4, "stages": 3,
               "dequant_ahead": true},
              {"max_m": 256, "kernel": "wgmma", "block_m": 256, "warps": 8, "stages": 4,
               "dequant_ahead": true},
              {"kernel": "wgmma", "block_m": 64, "warps": 4, "stages": 4,
               "pipeline": "mbarrier", "copy": "tma", "dequant_ahead": true}]})";
  };
  const std::string dir = testing::TempDir();
  int kernels = 0, expected = 0;
  // 16-bit activations (HGMMA), then 8-bit ones: FP8 (QGMMA) with channel scales and with MXFP4's
  // exponent tables, and int8 (IGMMA) with groups folded in f32.
  for (const char* text : {"w=uint4b8 a=f16 c=f16 s=f16:g128 n=4096 k=4096",
                           "w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192",  // the wide tiles
                           "w=uint3b4 a=f16 c=f16 s=f16:g64 n=4096 k=4096",
                           "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=bf16 n=4096 k=4096",
                           "w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=8192 k=8192",
                           "w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=8192 k=8192",
                           "w=uint4b8 a=int8 c=bf16 s=bf16:g128 n=8192 k=8192",
                           // MoE (moe_wgmma: the same kernel gathering rows of A, more
                           // registers): the Qwen3-30B-A3B gate_up and gpt-oss MXFP4 x e4m3
                           "w=uint4b8 a=f16 c=f16 s=f16:g128 n=1536 k=2048 e=128",
                           "w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=5760 k=2880 e=128"}) {
    const auto format = hm::core::Format::parse(text);
    const auto layer =
        hm::gemm::make_layer(format, hm::core::parse_arch("sm_90a"), "sm_90a", nullptr);
    auto ranges = hm::gemm::default_ranges(layer);
    if (format.experts == 1)  // the extra tiles are the dense kernel's
      for (const auto& r : hm::gemm::parse_ranges(extra_tiles(!format.activation.is_integer())))
        ranges.push_back(r);
    expected += static_cast<int>(ranges.size());
    for (const auto& range : ranges) {
      auto kernel = range.family->generate(*range.tile, layer);
      const auto out = compiler->compile(kernel.request);
      const std::string path = dir + "/hazards_" + kernel.entry + ".cubin";
      std::ofstream(path, std::ios::binary) << out.image;
      const Output dump = run("'" + cuobjdump + "' -sass '" + path + "' 2>&1");
      std::remove(path.c_str());
      const std::string failure = disassembly_failure(dump);
      ASSERT_TRUE(failure.empty()) << cuobjdump << " -sass failed on " << kernel.entry << ": "
                                   << failure
                                   << "(scripts/setup.sh installs cuobjdump with nvdisasm)";
      const Scan s = scan(dump.text);
      // The scan must have seen the structure it checks, or it proves nothing.
      EXPECT_GE(s.hgmma, 4) << text << " " << range.tile->name();
      EXPECT_GE(s.waits, 1) << text << " " << range.tile->name();
      EXPECT_TRUE(s.hazards.empty()) << text << " " << range.tile->name() << ": "
                                     << s.hazards.size() << " writes, first: " << s.hazards[0];
      ++kernels;
    }
  }
  EXPECT_EQ(kernels, expected);
  EXPECT_GE(kernels, 60);
}

// The scan itself, on hand-made SASS: a write into an in-flight A register is caught, one after
// the wait or into another register is not.
TEST(WgmmaRegisterHazards, TheScanCatchesAWriteBeforeTheWait) {
  const std::string sass =
      "        /*0100*/                   HGMMA.64x64x16.F32 R24, R88, gdesc[UR16], R24 ;\n"
      "        /*0110*/                   IMAD R12, R3, 0x10, RZ ;\n"
      "        /*0120*/                   LDS.U16 R90, [R22+0x4600] ;\n"
      "        /*0130*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
      "        /*0140*/                   MOV R89, R12 ;\n";
  const Scan s = scan(sass);
  EXPECT_EQ(s.hgmma, 1);
  EXPECT_EQ(s.waits, 1);
  ASSERT_EQ(s.hazards.size(), 1u);
  EXPECT_NE(s.hazards[0].find("R90"), std::string::npos);
}

// With a group kept in flight (wgmma.wait_group 1: DEPBAR.LE gsb0, 0x1), the newest group's A
// registers stay in flight past the wait and the older group's are free; a wait for none frees
// both. QGMMA (FP8) and IGMMA (int8) count as HGMMA does.
TEST(WgmmaRegisterHazards, AWaitForOneGroupKeepsTheNewestInFlight) {
  const std::string sass =
      "        /*0100*/                   QGMMA.64x64x32.F32.E4M3.E4M3 R24, R88, gdesc[UR16], R24, gsb0 ;\n"
      "        /*0110*/                   IGMMA.64x64x32.S8.S8 R56, R92, gdesc[UR18], R56, gsb0 ;\n"
      "        /*0120*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;\n"
      "        /*0130*/                   MOV R89, R12 ;\n"
      "        /*0140*/                   LDS R93, [R22+0x4600] ;\n"
      "        /*0150*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
      "        /*0160*/                   MOV R94, R12 ;\n";
  const Scan s = scan(sass);
  EXPECT_EQ(s.hgmma, 2);
  EXPECT_EQ(s.waits, 2);
  ASSERT_EQ(s.hazards.size(), 1u);
  EXPECT_NE(s.hazards[0].find("R93"), std::string::npos);
}

// A disassembler that cannot run is a failure with its own words, never a disassembly to count.
TEST(WgmmaRegisterHazards, ADisassemblerFailureIsReportedNotScanned) {
  Output fatal{"cuobjdump fatal   : Could not find executable file 'nvdisasm'; you can try adding "
               "path to environment variables PATH or NVDISASM_PATH\n",
               0};
  EXPECT_NE(disassembly_failure(fatal).find("nvdisasm"), std::string::npos);
  Output crashed{"\n\tcode for sm_90a\n", 1 << 8};  // exit status 1
  EXPECT_NE(disassembly_failure(crashed).find("status"), std::string::npos);
  EXPECT_FALSE(disassembly_failure(run("false")).empty());
  EXPECT_TRUE(disassembly_failure(run("echo '        /*0000*/  NOP ;'")).empty());
}

}  // namespace
