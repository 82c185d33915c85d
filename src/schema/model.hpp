// Whole Hugging Face model folders (hm_convert_model, `humming convert IN_DIR OUT_DIR`): the
// quantization config picks each layer's scheme and parameters (model_config.hpp), every shard
// is converted with layers spread over threads, and the result (shards, index, config, the
// other files) is published atomically (io/directory.hpp). docs/convert.md has the details.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schema/convert.hpp"

namespace hm::schema {

enum class ModelEvent : int32_t { kLayer = 1, kTensor = 2, kFile = 3 };
// Called on the calling thread, in output order; a nonzero return cancels the conversion.
using ModelProgress = int32_t (*)(void* user, int32_t kind, const char* name, const char* detail,
                                  uint64_t done, uint64_t total);

struct ModelRequest {
  std::string in_dir, out_dir;
  const Scheme* scheme = nullptr;  // forces every layer's scheme
  Options overrides;               // over the config (fields at their defaults leave it)
  bool force = false, dry_run = false;
  // Experts stored one layer each (<base>.experts.<i>.<proj>) written as one layer of E experts
  // (<base>.experts.<proj>); with join_gate_up, gate and up as one <base>.experts.gate_up_proj.
  bool stack_experts = false, join_gate_up = false;
  int threads = 0;  // 0: usable_threads()
  ModelProgress progress = nullptr;
  void* user = nullptr;
};

struct ModelResult {
  int32_t layers = 0, tensors = 0, files = 0, shards = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  double seconds = 0;
};

ModelResult convert_model(const ModelRequest& request);

// The safetensors shards of a model folder, by the rule convert_model reads an input with: the
// files model.safetensors.index.json names, else model.safetensors, else every *.safetensors
// (names inside dir, sorted). Throws hm::Error for a bad index or a folder without weights.
std::vector<std::string> shard_files(const std::string& dir);

}  // namespace hm::schema
