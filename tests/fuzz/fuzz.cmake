# Fuzzing tier: libFuzzer targets for what reads untrusted bytes -- the
# topology JSON and NCCL XML readers, unique-id decoding, the bootstrap
# root's message handling and the tuning bundle (with the plan texts) --
# built with clang, ASan and UBSan in <build>/fuzz (fuzz.build), each then
# run for GROVE_FUZZ_SECONDS over its corpus in tests/fuzz/corpus/
# (fuzz.<name>). Skipped (77) without clang.
set(GROVE_FUZZ_SECONDS 30 CACHE STRING "Seconds each fuzzer runs in the test suite")
set(_fz ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME fuzz.build COMMAND ${_fz}/build-fuzzers ${CMAKE_BINARY_DIR}/fuzz ${PROJECT_SOURCE_DIR})
set_tests_properties(fuzz.build PROPERTIES LABELS fuzz TIMEOUT 1800 PROCESSORS 2
                     SKIP_RETURN_CODE 77 FIXTURES_SETUP grove_fuzz_build)
foreach(name topology_json nccl_xml unique_id bootstrap_root tuning_bundle)
  add_test(NAME fuzz.${name}
           COMMAND ${_fz}/run-fuzzer ${CMAKE_BINARY_DIR}/fuzz/bin/fuzz_${name}
                   ${_fz}/corpus/${name} ${GROVE_FUZZ_SECONDS})
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 300 SKIP_RETURN_CODE 77
                       FIXTURES_REQUIRED grove_fuzz_build)
endforeach()
