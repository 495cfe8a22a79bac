# Fuzzing tier: libFuzzer targets for what reads untrusted bytes -- the
# topology JSON and NCCL XML readers, unique-id decoding, the bootstrap
# root's message handling and the tuning bundle (with the plan texts) --
# built with clang, ASan and UBSan by sanitize.build (tests/sanitize, one
# build of the layers for both tiers), each then run for GROVE_FUZZ_SECONDS
# over its corpus in tests/fuzz/corpus/ (fuzz.<name>). Skipped (77) when
# that build had no clang.
set(GROVE_FUZZ_SECONDS 30 CACHE STRING "Seconds each fuzzer runs in the test suite")
set(_fz ${CMAKE_CURRENT_LIST_DIR})
foreach(name topology_json nccl_xml unique_id bootstrap_root tuning_bundle)
  add_test(NAME fuzz.${name}
           COMMAND ${_fz}/run-fuzzer ${GROVE_SANITIZE_DIR}/bin/fuzz_${name}
                   ${_fz}/corpus/${name} ${GROVE_FUZZ_SECONDS})
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 300 SKIP_RETURN_CODE 77
                       FIXTURES_REQUIRED grove_sanitize_build)
endforeach()
