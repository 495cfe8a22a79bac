# The device interpreter's CPU side: lowering, and the host emulation
# compared with the host executor (exec/device/). The harness and topology
# targets come from other areas' files, so the targets are added once the
# whole directory is read.
function(_grove_device_tests)
  grove_gtest(test_dev_lower SOURCES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/dev_lower_test.cc
              LIBS grove_algorithms grove_exec grove_base LABELS unit)
  if(TARGET grove_test_harness AND TARGET grove_topology)
    grove_gtest(test_dev_emulation
                SOURCES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/dev_emulation_test.cc
                        ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/dev_emulation_fail_test.cc
                LIBS grove_algorithms grove_topology grove_exec grove_kernels
                     grove_transport_loopback grove_test_harness grove_base
                LABELS unit TIMEOUT 300 PROCESSORS 2)
    target_compile_definitions(test_dev_emulation PRIVATE
                               GROVE_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
    grove_gtest(test_stream_tape SOURCES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/stream_tape_test.cc
                LIBS grove_core grove_algorithms grove_exec grove_kernels grove_transport_loopback
                     grove_test_harness grove_base
                LABELS unit TIMEOUT 300 PROCESSORS 2)
  endif()
endfunction()
cmake_language(DEFER CALL _grove_device_tests)
