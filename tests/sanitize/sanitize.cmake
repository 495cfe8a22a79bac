# Sanitizer tier: the unit and multi-process tests that exercise the data
# path, the bootstrap and the failure handling, rebuilt with a sanitizer in
# <build>/sanitize-<kind> (run-sanitized lists them). sanitize.address
# (ASan + UBSan) runs in the suite; sanitize.thread (TSan) only with
# GROVE_TSAN=1 in the environment (skipped otherwise).
foreach(kind address thread)
  add_test(NAME sanitize.${kind}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/run-sanitized ${kind}
                   ${CMAKE_BINARY_DIR}/sanitize-${kind} ${PROJECT_SOURCE_DIR})
  set_tests_properties(sanitize.${kind} PROPERTIES LABELS sanitize TIMEOUT 2400 PROCESSORS 2
                       SKIP_RETURN_CODE 77)
endforeach()
