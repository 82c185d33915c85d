# The language bindings (label bindings): Python (pytest over the SWIG module built by
# bindings/python), Rust (cargo test) and Go (go test), each with
#   bindings_<lang>           host tests plus the runtime on the mock CUDA driver
#   bindings_<lang>_gpu       the GPU tests; exits 77 (skipped) where there is no CUDA device
#                             (in the other runs they report skipped / ignored, never passed)
#   bindings_coverage_<lang>  fails when include/humming.h has a function or constant the
#                             binding lacks (the header is parsed when the test runs)
# and bindings_rust_sys_fresh, which fails when humming-sys's committed bindings are stale.
# cargo and go build into the build tree (nothing is written to the source tree); a missing
# tool fails its tests with a message rather than skipping them.
set(HM_BINDINGS_SRC ${PROJECT_SOURCE_DIR}/bindings)
set(HM_BINDINGS_TESTS ${CMAKE_CURRENT_LIST_DIR})
set(HM_BINDINGS_WORK ${PROJECT_BINARY_DIR}/bindings-work)
set(HM_BINDINGS_HEADER ${PROJECT_SOURCE_DIR}/include/humming.h)
set(HM_BINDINGS_LIB_DIR $<TARGET_FILE_DIR:humming>)
# Shared by every binding test: where the library and the mock driver are, a kernel cache in
# the build tree (so compiled kernels are reused from run to run), and no silent mock skips.
set(HM_BINDINGS_ENV
  "HUMMING_LIBRARY=$<TARGET_FILE:humming>"
  "HUMMING_HEADER=${HM_BINDINGS_HEADER}"
  "HUMMING_CACHE_DIR=${HM_BINDINGS_WORK}/kernel-cache"
  "LD_LIBRARY_PATH=${HM_BINDINGS_LIB_DIR}")
set(HM_BINDINGS_MOCK_ENV
  "HUMMING_MOCK_DRIVER=$<TARGET_FILE:humming_mock_cuda>"
  "HUMMING_REQUIRE_MOCK=1")

find_package(Python3 COMPONENTS Interpreter)
find_program(HM_CARGO cargo HINTS $ENV{HOME}/.cargo/bin)
find_program(HM_GO go)
find_program(HM_BINDGEN bindgen HINTS $ENV{HOME}/.cargo/bin)

# add_test with the shared properties; `tool` is the program that must exist for it to run.
function(hm_binding_test name tool)
  cmake_parse_arguments(ARG "" "WORKING_DIRECTORY;RESOURCE_LOCK" "COMMAND;ENVIRONMENT" ${ARGN})
  if(tool)
    add_test(NAME ${name} COMMAND ${ARG_COMMAND})
  else()
    message(WARNING "${name} will fail: a tool it needs was not found")
    add_test(NAME ${name} COMMAND sh -c
             "echo '${name}: a tool it needs (python3, cargo, go or bindgen) was not found when CMake ran' >&2; exit 1")
  endif()
  if(ARG_WORKING_DIRECTORY)
    set_tests_properties(${name} PROPERTIES WORKING_DIRECTORY ${ARG_WORKING_DIRECTORY})
  endif()
  if(ARG_RESOURCE_LOCK)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK ${ARG_RESOURCE_LOCK})
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS bindings
    SKIP_RETURN_CODE 77
    TIMEOUT 600
    ENVIRONMENT "${HM_BINDINGS_ENV};${ARG_ENVIRONMENT}")
endfunction()

set(HM_PY ${Python3_EXECUTABLE})
set(HM_GATE ${HM_PY} ${HM_BINDINGS_TESTS}/gpu_gate.py $<TARGET_FILE:humming>)

# ---- Python --------------------------------------------------------------------------------
set(HM_PY_PACKAGE ${PROJECT_BINARY_DIR}/bindings/python/package)
set(HM_PY_ENV "HUMMING_PYTHON_PACKAGE=${HM_PY_PACKAGE}" "PYTHONDONTWRITEBYTECODE=1")
set(HM_PYTEST ${HM_PY} -m pytest -q -p no:cacheprovider -rs)
hm_binding_test(bindings_python "${Python3_Interpreter_FOUND}"
  COMMAND ${HM_PYTEST} ${HM_BINDINGS_TESTS}/python
          --ignore=${HM_BINDINGS_TESTS}/python/test_gpu_plan.py
          --ignore=${HM_BINDINGS_TESTS}/python/test_gpu_torch.py
          --ignore=${HM_BINDINGS_TESTS}/python/test_gpu_torch_moe.py
  ENVIRONMENT ${HM_PY_ENV} ${HM_BINDINGS_MOCK_ENV})
hm_binding_test(bindings_python_gpu "${Python3_Interpreter_FOUND}"
  COMMAND ${HM_GATE} ${HM_PYTEST} ${HM_BINDINGS_TESTS}/python/test_gpu_plan.py
          ${HM_BINDINGS_TESTS}/python/test_gpu_torch.py
          ${HM_BINDINGS_TESTS}/python/test_gpu_torch_moe.py
  ENVIRONMENT ${HM_PY_ENV})
# The two ends of what find_package(SWIG 4.0) accepts, as pinned PyPI SWIGs that
# scripts/setup.sh installs under HUMMING_TOOLS_DIR: the module must build and pass with both, not
# only with the SWIG the main build found.
if(DEFINED ENV{HUMMING_TOOLS_DIR})
  set(HM_TOOLS_DIR_DEFAULT "$ENV{HUMMING_TOOLS_DIR}")
else()
  set(HM_TOOLS_DIR_DEFAULT "$ENV{HOME}/.cache/humming-tools")
endif()
set(HM_TOOLS_DIR "${HM_TOOLS_DIR_DEFAULT}" CACHE PATH
    "where scripts/setup.sh installs test-only tools (the pinned SWIGs)")
foreach(swig_version 4.0.2 4.5.1)
  string(REPLACE "." "_" swig_tag ${swig_version})
  hm_binding_test(bindings_python_swig_${swig_tag} "${Python3_Interpreter_FOUND}"
    COMMAND ${HM_BINDINGS_TESTS}/python_swig_version.sh
            ${HM_TOOLS_DIR}/swig-${swig_version}/bin/swig ${HM_PY} ${PROJECT_SOURCE_DIR}/include
            ${HM_BINDINGS_SRC}/python/raw.i ${HM_PY_PACKAGE} $<TARGET_FILE:humming>
            ${HM_BINDINGS_WORK}/swig-${swig_version} ${HM_BINDINGS_TESTS}/python
    ENVIRONMENT ${HM_BINDINGS_MOCK_ENV})
endforeach()
hm_binding_test(bindings_coverage_python "${Python3_Interpreter_FOUND}"
  COMMAND ${HM_PY} ${HM_BINDINGS_TESTS}/check_coverage.py ${HM_BINDINGS_HEADER} python
          ${HM_PY_PACKAGE}
  ENVIRONMENT ${HM_PY_ENV})

# ---- Rust ----------------------------------------------------------------------------------
get_filename_component(HM_CARGO_BIN "${HM_CARGO}" DIRECTORY)
set(HM_CARGO_ENV
  "PATH=${HM_CARGO_BIN}:$ENV{PATH}"
  "CARGO_TARGET_DIR=${HM_BINDINGS_WORK}/cargo"
  "HUMMING_LIB_DIR=${HM_BINDINGS_LIB_DIR}")
set(HM_CARGO_TEST ${HM_CARGO} test --offline --locked --quiet
    --manifest-path ${HM_BINDINGS_SRC}/rust/Cargo.toml)
hm_binding_test(bindings_rust "${HM_CARGO}"
  COMMAND ${HM_CARGO_TEST} --workspace
  ENVIRONMENT ${HM_CARGO_ENV} ${HM_BINDINGS_MOCK_ENV}
  RESOURCE_LOCK cargo)
hm_binding_test(bindings_rust_gpu "${HM_CARGO}"
  COMMAND ${HM_GATE} ${HM_CARGO_TEST} -p humming --test gpu -- --ignored
  ENVIRONMENT ${HM_CARGO_ENV}
  RESOURCE_LOCK cargo)
hm_binding_test(bindings_rust_sys_fresh "${HM_BINDGEN}"
  COMMAND ${HM_BINDINGS_SRC}/rust/humming-sys/regenerate.sh --check)
hm_binding_test(bindings_coverage_rust "${Python3_Interpreter_FOUND}"
  COMMAND ${HM_PY} ${HM_BINDINGS_TESTS}/check_coverage.py ${HM_BINDINGS_HEADER} rust
          ${HM_BINDINGS_SRC}/rust)

# ---- Go ------------------------------------------------------------------------------------
set(HM_GO_ENV
  "GOCACHE=${HM_BINDINGS_WORK}/go-cache"
  "GOPATH=${HM_BINDINGS_WORK}/go-path"
  "GOPROXY=off"
  "GOTOOLCHAIN=local"
  "CGO_ENABLED=1"
  "CGO_LDFLAGS=-L${HM_BINDINGS_LIB_DIR} -Wl,-rpath,${HM_BINDINGS_LIB_DIR}")
hm_binding_test(bindings_go "${HM_GO}"
  COMMAND ${HM_GO} test -race -count=1 ./...
  WORKING_DIRECTORY ${HM_BINDINGS_SRC}/go
  ENVIRONMENT ${HM_GO_ENV} ${HM_BINDINGS_MOCK_ENV})
hm_binding_test(bindings_go_gpu "${HM_GO}"
  COMMAND ${HM_GATE} ${HM_GO} test -count=1 -v -run GPU .
  WORKING_DIRECTORY ${HM_BINDINGS_SRC}/go
  ENVIRONMENT ${HM_GO_ENV})
hm_binding_test(bindings_coverage_go "${Python3_Interpreter_FOUND}"
  COMMAND ${HM_PY} ${HM_BINDINGS_TESTS}/check_coverage.py ${HM_BINDINGS_HEADER} go
          ${HM_BINDINGS_SRC}/go)
