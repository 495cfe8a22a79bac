# Sanitizer tier: the unit and multi-process tests that exercise the data
# path, the bootstrap and the failure handling, rebuilt with a sanitizer in
# <build>/sanitize-<kind> (build-sanitized lists them) and run there
# (run-sanitized). sanitize.build builds the address kind (ASan + UBSan;
# with clang also the libFuzzer targets the fuzz tier runs, tests/fuzz), and
# sanitize.address runs it, in the suite; sanitize.thread (TSan) builds and
# runs its own only with GROVE_TSAN=1 in the environment (skipped otherwise).
set(GROVE_SANITIZE_DIR ${CMAKE_BINARY_DIR}/sanitize-address)
add_test(NAME sanitize.build
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/build-sanitized address ${GROVE_SANITIZE_DIR}
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(sanitize.build PROPERTIES LABELS "sanitize;fuzz" TIMEOUT 2400 PROCESSORS 2
                     FIXTURES_SETUP grove_sanitize_build)
foreach(kind address thread)
  add_test(NAME sanitize.${kind}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/run-sanitized ${kind}
                   ${CMAKE_BINARY_DIR}/sanitize-${kind} ${PROJECT_SOURCE_DIR})
  set_tests_properties(sanitize.${kind} PROPERTIES LABELS sanitize TIMEOUT 2400 PROCESSORS 2
                       SKIP_RETURN_CODE 77)
endforeach()
set_tests_properties(sanitize.address PROPERTIES FIXTURES_REQUIRED grove_sanitize_build)
