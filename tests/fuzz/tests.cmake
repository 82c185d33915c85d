# Fuzz targets (tests/fuzz/README.md): the format parser, the safetensors reader with every
# converter, and the C ABI's size functions. Each is registered under the label `fuzz` as a
# short run (HM_FUZZ_SECONDS each, 3 by default) seeded from tests/fuzz/corpus/<target>:
#   - where the compiler has libFuzzer (clang with -fsanitize=fuzzer), as a libFuzzer binary;
#     configure with -DHUMMING_FUZZ=ON as well to instrument the library itself for coverage;
#   - otherwise with driver.cpp, which replays the corpus and random mutations of it, and a
#     `fuzz_libfuzzer` entry that reports CTest's skip code.
include(CheckCXXSourceCompiles)
set(_hm_fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
set(HM_FUZZ_SECONDS 3 CACHE STRING "Seconds each fuzz target runs under CTest (label fuzz)")

set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
check_cxx_source_compiles(
  "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }"
  HM_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)

foreach(_target format safetensors sizes)
  set(_exe fuzz_${_target})
  set(_corpus ${_hm_fuzz_dir}/corpus/${_target})
  if(HM_HAVE_LIBFUZZER)
    add_executable(${_exe} ${_hm_fuzz_dir}/fuzz_${_target}.cpp)
    target_compile_options(${_exe} PRIVATE -fsanitize=fuzzer)
    target_link_options(${_exe} PRIVATE -fsanitize=fuzzer)
    # New inputs go to a scratch directory in the build tree, never into the committed seeds.
    set(_scratch ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus_${_target})
    file(MAKE_DIRECTORY ${_scratch})
    add_test(NAME ${_exe} COMMAND ${_exe} -max_total_time=${HM_FUZZ_SECONDS} -timeout=10
                                  -rss_limit_mb=2048 -max_len=4096 ${_scratch} ${_corpus})
  else()
    add_executable(${_exe} ${_hm_fuzz_dir}/fuzz_${_target}.cpp ${_hm_fuzz_dir}/driver.cpp)
    add_test(NAME ${_exe} COMMAND ${_exe} --seconds ${HM_FUZZ_SECONDS} ${_corpus})
  endif()
  target_link_libraries(${_exe} PRIVATE humming_core)
  target_include_directories(${_exe} PRIVATE ${_hm_fuzz_dir})
  target_compile_options(${_exe} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  set_tests_properties(${_exe} PROPERTIES LABELS fuzz TIMEOUT 120
                       WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
endforeach()

if(NOT HM_HAVE_LIBFUZZER)
  # Says why the coverage-guided runs are missing, as a skip rather than a silent pass.
  add_test(NAME fuzz_libfuzzer
           COMMAND sh -c "echo '${CMAKE_CXX_COMPILER_ID} has no -fsanitize=fuzzer: the fuzz_* tests ran the replay driver; configure with CXX=clang++ (and libclang-rt-dev) for libFuzzer, see tests/fuzz/README.md'; exit ${HM_TEST_SKIP_CODE}")
  set_tests_properties(fuzz_libfuzzer PROPERTIES LABELS fuzz SKIP_RETURN_CODE ${HM_TEST_SKIP_CODE})
endif()
