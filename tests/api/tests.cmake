# Whole-program checks of the ABI surface (label api).
add_test(NAME header_compiles_as_c99
  COMMAND ${CMAKE_C_COMPILER} -std=c99 -Wall -Wextra -Werror -pedantic
          -I${PROJECT_SOURCE_DIR}/include -o ${CMAKE_CURRENT_BINARY_DIR}/header_c99.o
          -c ${CMAKE_CURRENT_LIST_DIR}/header_c99.c)
set_tests_properties(header_compiles_as_c99 PROPERTIES LABELS api)

find_program(HM_NM NAMES nm REQUIRED)
add_test(NAME exports_only_hm
  COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:humming> -DHEADER=${PROJECT_SOURCE_DIR}/include/humming.h
          -DNM=${HM_NM} -P ${CMAKE_CURRENT_LIST_DIR}/check_exports.cmake)
set_tests_properties(exports_only_hm PROPERTIES LABELS api)

# The library loads by its SONAME and carries the ABI major in it.
add_test(NAME soname_carries_abi_major
  COMMAND sh -c "objdump -p '$<TARGET_FILE:humming>' | grep -q 'SONAME *libhumming.so.${HM_ABI_VERSION}$'")
set_tests_properties(soname_carries_abi_major PROPERTIES LABELS api)

# The wgmma instruction headers are generated (scripts/gen_wgmma.py) and checked in: they must be
# what the script writes today.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME wgmma_headers_current
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/gen_wgmma.py --check)
  set_tests_properties(wgmma_headers_current PROPERTIES LABELS host)
endif()
