// Times the MoE GEMM (hm_plan_gemm on a format with e >= 2) for the shapes of issue 18:
// Qwen3-30B-A3B (E = 128, top-8: gate_up N = 1536 K = 2048, down N = 2048 K = 768), DeepSeek-V3
// (E = 256, top-8, K = 7168, N = 4096 and its TP8 slice N = 512) and gpt-oss-120b (E = 128,
// top-4, MXFP4, gate_up N = 5760 K = 2880), at M = 1, 16, 128, 1024, 4096 tokens. Routing:
// uniform random top-k distinct experts per token, aligned on the host (the routing step is not
// timed here). Each call is replayed from a CUDA graph with the L2 flushed before it; prints the
// median µs and the weight bytes the call must read against 4.27 TB/s (the experts hit by the
// routing, each read once). Values do not matter for timing: the buffers hold a fixed pattern.
// The Qwen3 shapes are also timed in the grouped modes (HM_ARG_MOE_MODE) on the same routing:
// contiguous with the M * top_k rows grouped by expert (unpadded offsets), masked with slabs of
// T_max = the most rows any expert got (the best case for the masked grid). The 8-bit shapes
// (gpt-oss W4A8 with e4m3, DeepSeek-V3 FP8 with 1 x 128 activation groups, Qwen3 int4 x int8)
// pass codes of 1.0 and activation scales of 1 (the quantizer is timed by
// bench_activation_quant).
// --tuning FILE passes a tuning JSON (docs/tuning.md) to every plan, e.g. to force the mma.sync
// MoE family (benchmarks/tuning/moe_mma.json); --only PREFIX keeps the shapes whose name starts so;
// --ms LIST times only those M (default 1,16,128,1024,4096); --indexed-only skips the grouped modes
// (a tile sweep's quick form).
//   bench_moe [--device N] [--iters N] [--json FILE] [--tuning FILE] [--only PREFIX] [--ms LIST]
//             [--indexed-only 1]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_timing.hpp"
#include "humming.h"

namespace {

std::string last_error() {
  char buf[1024];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}

void check(hm_status_t s, const char* what) {
  if (s != HM_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, last_error().c_str());
    std::exit(1);
  }
}

struct Shape {
  const char* name;
  const char* format;
  int top_k;
};

}  // namespace

int main(int argc, char** argv) {
  int device = 0, iters = 100;
  const char* json_path = nullptr;
  const char* only = "";
  std::string tuning;
  std::vector<int64_t> ms = {1, 16, 128, 1024, 4096};
  bool indexed_only = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--ms")) {
      ms.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');) {
        const long long m = std::atoll(item.c_str());
        if (m < 1 || m > 4096) {
          std::fprintf(stderr, "--ms: %s is not in 1..4096\n", item.c_str());
          return 2;
        }
        ms.push_back(m);
      }
    }
    if (!std::strcmp(argv[i], "--indexed-only")) indexed_only = std::atoi(argv[i + 1]) != 0;
    if (!std::strcmp(argv[i], "--device")) device = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--json")) json_path = argv[i + 1];
    if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    if (!std::strcmp(argv[i], "--tuning")) {
      std::ifstream in(argv[i + 1]);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", argv[i + 1]);
        return 2;
      }
      std::stringstream text;
      text << in.rdbuf();
      tuning = text.str();
    }
  }
  hm_context_options_t o;
  hm_context_options_init(&o);
  o.device = device;
  hm_context_t* ctx = nullptr;
  if (hm_context_create(&o, &ctx) != HM_SUCCESS) {
    std::fprintf(stderr, "no GPU context: %s\n", last_error().c_str());
    return 77;
  }
  const gpu_timing::Driver cu = gpu_timing::load_driver();
  gpu_timing::DeviceStream device_stream(cu, device);
  const gpu_timing::CUstream stream = device_stream.stream();
  const size_t flush_bytes = size_t{256} << 20;
  uint64_t scratch = 0;
  check(hm_device_alloc(ctx, flush_bytes, &scratch), "alloc flush");
  gpu_timing::Timer timer(cu, stream, scratch, flush_bytes, iters);

  const Shape shapes[] = {
      {"qwen3_30b_gate_up", "w=uint4b8 a=f16 c=f16 s=f16:g128 n=1536 k=2048 e=128", 8},
      {"qwen3_30b_down", "w=uint4b8 a=f16 c=f16 s=f16:g128 n=2048 k=768 e=128", 8},
      {"deepseek_v3_tp8", "w=uint4b8 a=bf16 c=bf16 s=bf16:g128 n=512 k=7168 e=256", 8},
      {"deepseek_v3", "w=uint4b8 a=bf16 c=bf16 s=bf16:g128 n=4096 k=7168 e=256", 8},
      {"gpt_oss_120b_gate_up", "w=e2m1 a=bf16 c=bf16 s=ue8m0:g32 n=5760 k=2880 e=128", 4},
      // 8-bit activations (issue 17 x 18)
      {"gpt_oss_120b_gate_up_e4m3", "w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=5760 k=2880 e=128",
       4},
      {"deepseek_v3_fp8_token", "w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=4096 k=7168 e=256", 8},
      {"deepseek_v3_fp8", "w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=4096 k=7168 e=256", 8},
      {"qwen3_30b_gate_up_int8", "w=uint4b8 a=int8 c=f16 s=f16:g128 n=1536 k=2048 e=128", 8},
  };
  std::string json = "[";
  std::printf("%-22s %-10s %6s %8s %10s %10s %8s  %s\n", "shape", "mode", "M", "experts",
              "median_us", "floor_us", "of_floor", "tile");
  std::mt19937 rng(1);
  for (const Shape& s : shapes) {
    if (std::strncmp(s.name, only, std::strlen(only)) != 0) continue;
    hm_format_t* f = nullptr;
    check(hm_format_parse(s.format, &f), s.format);
    int64_t n = 0, k = 0;
    int32_t e = 0;
    hm_format_get_shape(f, &n, &k, &e);
    hm_dtype_t act = 0;
    int32_t act_group_k = 0;
    hm_format_get_dtype(f, HM_ROLE_ACTIVATION, &act);
    hm_format_get_activation_groups(f, &act_group_k);
    const bool act8 = (act & 0xFFu) == 8;  // bits 0..7 of a dtype: its width
    const int64_t act_bytes = act8 ? 1 : 2;
    const int64_t act_groups = act_group_k > 0 ? (k + act_group_k - 1) / act_group_k : 1;
    hm_packed_sizes_t ps;
    hm_packed_sizes_init(&ps);
    check(hm_format_packed_sizes(f, &ps), "packed sizes");
    hm_plan_options_t plan_options;
    hm_plan_options_init(&plan_options);
    plan_options.tuning_json = tuning.empty() ? nullptr : tuning.c_str();
    hm_plan_t* plan = nullptr;
    check(hm_plan_create(ctx, f, &plan_options, &plan), "plan");
    check(hm_plan_prepare(plan), "prepare");
    uint64_t w = 0, scales = 0, a = 0, c = 0, sorted = 0, experts = 0, padded = 0;
    check(hm_device_alloc(ctx, ps.weight, &w), "alloc w");
    std::vector<uint8_t> pattern(std::max<uint64_t>(ps.weight, ps.scales), 0x11);
    check(hm_copy_to_device(ctx, w, pattern.data(), ps.weight), "copy w");
    check(hm_device_alloc(ctx, ps.scales, &scales), "alloc scales");
    for (size_t i = 1; i < pattern.size(); i += 2) pattern[i] = 0x3C;  // f16 ~1.0; ue8m0 fine
    check(hm_copy_to_device(ctx, scales, pattern.data(), ps.scales), "copy scales");
    const int64_t max_m = 4096;
    const bool grouped = !indexed_only && std::strncmp(s.name, "qwen", 4) == 0;
    // Room for the grouped modes' rows too: M * top_k rows, or E slabs of at most 2 * M * top_k
    // / E + 64 rows (uniform routing stays far below).
    const int64_t max_rows = grouped ? 2 * max_m * s.top_k + 64 * e : max_m;
    check(hm_device_alloc(ctx, max_rows * k * act_bytes, &a), "alloc a");
    if (act8) {  // 1.0 in e4m3 (0x38) and in int8
      std::vector<uint8_t> ones(static_cast<size_t>(max_rows * k), act == HM_DTYPE_INT8 ? 1 : 0x38);
      check(hm_copy_to_device(ctx, a, ones.data(), ones.size()), "copy a");
    } else {
      std::vector<uint16_t> ones(static_cast<size_t>(max_rows * k), 0x3C00);
      check(hm_copy_to_device(ctx, a, ones.data(), ones.size() * 2), "copy a");
    }
    // 8-bit activations: scales of 1 for every row A can have; group x tensor: a global of 1
    // per expert.
    uint64_t act_scales = 0, global = 0;
    if (act8) {
      std::vector<float> one(static_cast<size_t>(max_rows * act_groups), 1.0f);
      check(hm_device_alloc(ctx, one.size() * 4, &act_scales), "alloc act scales");
      check(hm_copy_to_device(ctx, act_scales, one.data(), one.size() * 4), "copy act scales");
    }
    if (ps.global_scale > 0) {
      std::vector<float> one(static_cast<size_t>(ps.global_scale / 4), 1.0f);
      check(hm_device_alloc(ctx, ps.global_scale, &global), "alloc global");
      check(hm_copy_to_device(ctx, global, one.data(), ps.global_scale), "copy global");
    }
    check(hm_device_alloc(ctx, std::max(max_m * s.top_k, max_rows) * n * 2, &c), "alloc c");
    for (int64_t m : ms) {
      int32_t block = 0;
      int64_t capacity = 0;
      check(hm_plan_moe_block_size(plan, m, &block), "block size");
      check(hm_plan_moe_rows(plan, m, s.top_k, &capacity), "rows");
      // Uniform routing, aligned on the host.
      std::vector<int32_t> route(static_cast<size_t>(m * s.top_k)), order(e);
      for (int64_t t = 0; t < m; ++t) {
        for (int i = 0; i < e; ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), rng);
        for (int j = 0; j < s.top_k; ++j) route[t * s.top_k + j] = order[j];
      }
      std::vector<int32_t> ids(static_cast<size_t>(capacity), static_cast<int32_t>(m * s.top_k));
      std::vector<int32_t> blocks(static_cast<size_t>(capacity / block), -1);
      std::vector<std::vector<int32_t>> of(e);
      for (int64_t id = 0; id < m * s.top_k; ++id) of[route[id]].push_back(static_cast<int32_t>(id));
      int64_t pos = 0, hit = 0;
      for (int x = 0; x < e; ++x) {
        if (of[x].empty()) continue;
        ++hit;
        std::copy(of[x].begin(), of[x].end(), ids.begin() + pos);
        const int64_t nb = (static_cast<int64_t>(of[x].size()) + block - 1) / block;
        for (int64_t b = 0; b < nb; ++b) blocks[pos / block + b] = x;
        pos += nb * block;
      }
      const int32_t num_padded = static_cast<int32_t>(pos);
      check(hm_device_alloc(ctx, ids.size() * 4, &sorted), "alloc ids");
      check(hm_copy_to_device(ctx, sorted, ids.data(), ids.size() * 4), "copy ids");
      check(hm_device_alloc(ctx, blocks.size() * 4, &experts), "alloc experts");
      check(hm_copy_to_device(ctx, experts, blocks.data(), blocks.size() * 4), "copy experts");
      check(hm_device_alloc(ctx, 4, &padded), "alloc padded");
      check(hm_copy_to_device(ctx, padded, &num_padded, 4), "copy padded");
      hm_launch_params_t* p = nullptr;
      check(hm_launch_params_create(&p), "params");
      hm_launch_params_set_pointer(p, HM_ARG_A, a);
      hm_launch_params_set_pointer(p, HM_ARG_B, w);
      hm_launch_params_set_pointer(p, HM_ARG_SCALES, scales);
      hm_launch_params_set_pointer(p, HM_ARG_C, c);
      hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES, act_scales);
      hm_launch_params_set_pointer(p, HM_ARG_GLOBAL, global);
      hm_launch_params_set_pointer(p, HM_ARG_SORTED_IDS, sorted);
      hm_launch_params_set_pointer(p, HM_ARG_EXPERT_IDS, experts);
      hm_launch_params_set_pointer(p, HM_ARG_NUM_TOKENS_PADDED, padded);
      hm_launch_params_set_int(p, HM_ARG_M, m);
      hm_launch_params_set_int(p, HM_ARG_TOP_K, s.top_k);
      // Times one call of `params` (M tokens, M * top_k assignments) as `mode`, which runs the
      // tile of `tile_m` tokens (docs/moe.md: a grouped call's rows per expert in tokens).
      auto time_mode = [&](hm_launch_params_t* params, const char* mode, int64_t tile_m) {
        const gpu_timing::Launch call = [&]() -> std::string {
          if (hm_plan_gemm(plan, params, stream) != HM_SUCCESS) return last_error();
          return "";
        };
        const gpu_timing::Stats st = gpu_timing::time_graph(
            cu, timer, stream, gpu_timing::CU_STREAM_CAPTURE_MODE_GLOBAL, call, 10, iters);
        // The floor: the weights (and scales) of every expert hit, read once; A and C.
        const double a_rows = std::strcmp(mode, "indexed") == 0 ? double(m) : double(m) * s.top_k;
        const double bytes = double(hit) * double(ps.weight + ps.scales) / e +
                             a_rows * k * act_bytes + double(m) * s.top_k * n * 2;
        const double floor_us = bytes / 4.27e6;
        char desc[256] = "";
        hm_plan_describe(plan, tile_m, desc, sizeof desc, nullptr);
        if (!st.ok) {
          std::printf("%-22s %-10s %6lld failed: %s\n", s.name, mode, (long long)m,
                      st.error.c_str());
          return;
        }
        std::printf("%-22s %-10s %6lld %8lld %10.2f %10.2f %8.2f  %s\n", s.name, mode,
                    (long long)m, (long long)hit, st.median, floor_us, st.median / floor_us, desc);
        char line[512];
        std::snprintf(line, sizeof line,
                      "%s{\"shape\": \"%s\", \"mode\": \"%s\", \"format\": \"%s\", "
                      "\"top_k\": %d, \"m\": %lld, \"experts_hit\": %lld, "
                      "\"median_us\": %.3f, \"floor_us\": %.3f}",
                      json.size() > 1 ? ", " : "", s.name, mode, s.format, s.top_k, (long long)m,
                      (long long)hit, st.median, floor_us);
        json += line;
      };
      time_mode(p, "indexed", m);
      if (grouped) {
        // The same assignments grouped by expert: contiguous runs (HM_ARG_M = rows) ...
        std::vector<int32_t> offsets(static_cast<size_t>(e) + 1, 0), counts(e);
        int64_t t_max = 1;
        for (int x = 0; x < e; ++x) {
          counts[x] = static_cast<int32_t>(of[x].size());
          offsets[x + 1] = offsets[x] + counts[x];
          t_max = std::max<int64_t>(t_max, counts[x]);
        }
        uint64_t offs = 0, masked = 0;
        check(hm_device_alloc(ctx, offsets.size() * 4, &offs), "alloc offsets");
        check(hm_copy_to_device(ctx, offs, offsets.data(), offsets.size() * 4), "copy offsets");
        check(hm_device_alloc(ctx, counts.size() * 4, &masked), "alloc counts");
        check(hm_copy_to_device(ctx, masked, counts.data(), counts.size() * 4), "copy counts");
        hm_launch_params_t* g = nullptr;
        check(hm_launch_params_create(&g), "params");
        for (auto [slot, v] : {std::pair<int32_t, uint64_t>{HM_ARG_A, a}, {HM_ARG_B, w},
                               {HM_ARG_SCALES, scales}, {HM_ARG_C, c},
                               {HM_ARG_ACT_SCALES, act_scales}, {HM_ARG_GLOBAL, global}})
          hm_launch_params_set_pointer(g, slot, v);
        hm_launch_params_set_int(g, HM_ARG_MOE_MODE, HM_MOE_MODE_CONTIGUOUS);
        hm_launch_params_set_pointer(g, HM_ARG_EXPERT_OFFSETS, offs);
        hm_launch_params_set_int(g, HM_ARG_M, m * s.top_k);
        time_mode(g, "contiguous", std::max<int64_t>(1, m * s.top_k / 8));
        // ... and [E][T_max] slabs (HM_ARG_M = T_max).
        if (t_max * e <= max_rows) {
          hm_launch_params_set_pointer(g, HM_ARG_EXPERT_OFFSETS, 0);
          hm_launch_params_set_int(g, HM_ARG_MOE_MODE, HM_MOE_MODE_MASKED);
          hm_launch_params_set_pointer(g, HM_ARG_MASKED_M, masked);
          hm_launch_params_set_int(g, HM_ARG_M, t_max);
          time_mode(g, "masked", std::max<int64_t>(1, t_max * e / 8));
        }
        hm_launch_params_destroy(g);
        hm_device_free(ctx, offs);
        hm_device_free(ctx, masked);
      }
      hm_launch_params_destroy(p);
      for (uint64_t x : {sorted, experts, padded}) hm_device_free(ctx, x);
    }
    for (uint64_t x : {w, scales, a, c, act_scales, global})
      if (x != 0) hm_device_free(ctx, x);
    hm_plan_destroy(plan);
    hm_format_destroy(f);
  }
  json += "]\n";
  if (json_path) {
    FILE* out = std::fopen(json_path, "w");
    if (out) {
      std::fputs(json.c_str(), out);
      std::fclose(out);
    }
  }
  timer.destroy();
  device_stream.close();
  hm_device_free(ctx, scratch);
  hm_context_destroy(ctx);
  return 0;
}
