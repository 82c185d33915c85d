# Checks of the sanitizer build itself (HUMMING_SANITIZE only), labelled `host` so that
# scripts/test.sh runs them with the other sanitizer suites.
if(HUMMING_SANITIZE)
  add_library(hm_dynamic_tls_module MODULE ${CMAKE_CURRENT_SOURCE_DIR}/sanitizer/dynamic_tls_module.cpp)
  # Plain general-dynamic TLS and no sanitizer of its own: NVRTC's situation.
  target_compile_options(hm_dynamic_tls_module PRIVATE -ftls-model=global-dynamic -fno-sanitize=all)
  add_executable(hm_dynamic_tls ${CMAKE_CURRENT_SOURCE_DIR}/sanitizer/dynamic_tls.cpp)
  target_link_libraries(hm_dynamic_tls PRIVATE ${CMAKE_DL_LIBS})
  target_compile_definitions(hm_dynamic_tls PRIVATE HM_TEST_SKIP_CODE=${HM_TEST_SKIP_CODE})
  add_dependencies(hm_dynamic_tls hm_dynamic_tls_module)
  add_test(NAME leak_check_survives_dynamic_tls
           COMMAND hm_dynamic_tls $<TARGET_FILE:hm_dynamic_tls_module>)
  set_tests_properties(leak_check_survives_dynamic_tls PROPERTIES
    LABELS host SKIP_RETURN_CODE ${HM_TEST_SKIP_CODE} ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1")
endif()
