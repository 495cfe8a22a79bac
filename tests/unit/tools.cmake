# Tests of perf/ (options, conventions, exact data check) and tools/ (grove-launch).
# They link only the pure grove_perf_core, so they build before libgrove works.
if(TARGET grove_perf_core AND TARGET grove-launch)
  grove_gtest(test_tools SOURCES ${CMAKE_CURRENT_LIST_DIR}/tools_test.cc
              ${CMAKE_CURRENT_LIST_DIR}/tools_launch_test.cc
              ${CMAKE_CURRENT_LIST_DIR}/tools_launch_options_test.cc
              ${PROJECT_SOURCE_DIR}/tools/launch/launch_options.cc
              LIBS grove_perf_core grove_base LABELS unit TIMEOUT 120)
  target_compile_definitions(test_tools PRIVATE
                             GROVE_LAUNCH_PATH="$<TARGET_FILE:grove-launch>")
  add_dependencies(test_tools grove-launch)
endif()

# The perf binaries end to end, two ranks as threads, every value checked:
# on the CUDA device path through the host emulation (CUDA communicators over
# host buffers), and all_reduce_perf on host memory.
if(TARGET all_reduce_perf)
  grove_gtest(test_perf_memory SOURCES ${CMAKE_CURRENT_LIST_DIR}/perf_memory_test.cc
              LIBS grove_perf_harness LABELS unit TIMEOUT 60)
  set(_perf_args "-t,2,-b,8,-e,256K,-f,8,-n,3,-w,1,-c,1")
  foreach(coll all_reduce broadcast all_gather reduce_scatter sendrecv)
    add_test(NAME perf.emulated.${coll}
             COMMAND ${CMAKE_COMMAND} -DPERF_BIN=$<TARGET_FILE:${coll}_perf>
                     -DPERF_ARGS=${_perf_args}
                     "-DPERF_EXPECT=CUDA communicators on the host emulation"
                     -P ${CMAKE_CURRENT_LIST_DIR}/harness/perf_run_check.cmake)
    set_tests_properties(perf.emulated.${coll} PROPERTIES
      LABELS unit PROCESSORS 2 TIMEOUT 300
      ENVIRONMENT "GROVE_DEVICE_EMULATION=1;GROVE_DEVICE_KIND=cuda")
  endforeach()
  add_test(NAME perf.host.all_reduce
           COMMAND ${CMAKE_COMMAND} -DPERF_BIN=$<TARGET_FILE:all_reduce_perf>
                   -DPERF_ARGS=${_perf_args} "-DPERF_EXPECT=[host] CPU"
                   -P ${CMAKE_CURRENT_LIST_DIR}/harness/perf_run_check.cmake)
  set_tests_properties(perf.host.all_reduce PROPERTIES
    LABELS unit PROCESSORS 2 TIMEOUT 300 ENVIRONMENT "GROVE_DEVICE_KIND=host")
endif()
