# Python checks of the C ABI (label host): our dtype decode / encode against the ml_dtypes
# package. Needs Python 3 with pytest, numpy and ml_dtypes (CI installs them); anything missing
# fails the test rather than skipping it.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME python_ml_dtypes
    COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
            ${CMAKE_CURRENT_LIST_DIR}/test_ml_dtypes.py)
else()
  message(WARNING "No Python 3 interpreter: the test python_ml_dtypes will fail")
  add_test(NAME python_ml_dtypes COMMAND ${CMAKE_COMMAND} -E false)
endif()
set_tests_properties(python_ml_dtypes PROPERTIES
  ENVIRONMENT "HUMMING_LIBRARY=$<TARGET_FILE:humming>"
  LABELS "host;python"
  TIMEOUT 120)

# The benchmark reporting path without a GPU: bench_gemm --help / --dry-run --json and
# benchmarks/report.py on that output and the stored H200 results (standard library + pytest).
if(TARGET bench_gemm AND Python3_Interpreter_FOUND)
  add_test(NAME python_bench_report
    COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
            ${CMAKE_CURRENT_LIST_DIR}/test_bench_report.py)
  set_tests_properties(python_bench_report PROPERTIES
    ENVIRONMENT "BENCH_GEMM=$<TARGET_FILE:bench_gemm>"
    LABELS "host;python"
    TIMEOUT 120)
endif()

# Tensor parallelism on 2 GPUs through humming.torch and torch.distributed (NCCL). The script
# exits 77 (skipped) without torch, NCCL or 2 CUDA devices; it imports the Python package built
# from bindings/python, so it exists only with HUMMING_BUILD_PYTHON.
if(Python3_Interpreter_FOUND AND HUMMING_BUILD_PYTHON)
  add_test(NAME python_multi_gpu_torch
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_multi_gpu_torch.py)
  set_tests_properties(python_multi_gpu_torch PROPERTIES
    ENVIRONMENT "HUMMING_PYTHON_PACKAGE=${PROJECT_BINARY_DIR}/bindings/python/package;HUMMING_CACHE_DIR=${PROJECT_BINARY_DIR}/bindings-work/kernel-cache;LD_LIBRARY_PATH=$<TARGET_FILE_DIR:humming>;PYTHONDONTWRITEBYTECODE=1"
    LABELS "gpu;python"
    SKIP_RETURN_CODE 77
    TIMEOUT 600)
endif()
