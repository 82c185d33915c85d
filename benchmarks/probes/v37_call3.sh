# NOTES v37, call 3 (the device budget's last ~400 s): compute-sanitizer alone over the
# small-group-fold cases (Formats/DenseGemmA8 cases 41-45, DenseGemmA8Exact), short limits.
BUILD_TARGETS="test_gpu" SANITIZE_TOOLS="memcheck racecheck synccheck" SANITIZE_WARMUP=0 \
  MEMCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:DenseGemmA8Exact.*' MEMCHECK_LIMIT=50 \
  RACECHECK_FILTER='Formats/DenseGemmA8.MatchesTheHostReferenceForEveryTileAndRaggedShape/case4[1-5]' RACECHECK_LIMIT=60 \
  SYNCCHECK_FILTER='Formats/DenseGemmA8.MatchesTheHostReferenceForEveryTileAndRaggedShape/case4[1-5]' SYNCCHECK_LIMIT=30 \
  bash benchmarks/gpu_check.sh sanitize
