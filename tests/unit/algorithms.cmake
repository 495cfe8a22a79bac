# The algorithms layer: builders, validator, deadlock simulation, selector.
grove_gtest(test_algorithms
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/algorithms_test.cc
                    ${CMAKE_CURRENT_LIST_DIR}/algorithms_misc_test.cc
            LIBS grove_algorithms grove_base LABELS unit)

# End to end over the host executor and loopback transport. The harness
# target is defined by another area's .cmake file (possibly included after
# this one), so the target is added once the whole directory is read.
function(_grove_algorithms_exec_test)
  if(TARGET grove_test_harness AND TARGET grove_exec AND TARGET grove_kernels
     AND TARGET grove_transport_loopback)
    grove_gtest(test_algorithms_exec
                SOURCES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/algorithms_exec_test.cc
                LIBS grove_algorithms grove_exec grove_kernels grove_transport_loopback
                     grove_test_harness grove_base
                LABELS unit TIMEOUT 180)
  endif()
endfunction()
cmake_language(DEFER CALL _grove_algorithms_exec_test)
