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
