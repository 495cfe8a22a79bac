# The algorithms layer: builders, validator, deadlock simulation, selector.
grove_gtest(test_algorithms
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/algorithms_test.cc
                    ${CMAKE_CURRENT_LIST_DIR}/algorithms_misc_test.cc
                    ${CMAKE_CURRENT_LIST_DIR}/selector_test.cc
            LIBS grove_algorithms grove_transports grove_base LABELS unit)

# Trees, rings in any order, hierarchical all-reduce, fan-in.
grove_gtest(test_tree_algorithms
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/tree_algorithms_test.cc
                    ${CMAKE_CURRENT_LIST_DIR}/tree_fanin_test.cc
            LIBS grove_algorithms grove_transports grove_base LABELS unit)

# End to end over the host executor and loopback transport. The harness
# target is defined by another area's .cmake file (possibly included after
# this one), so the target is added once the whole directory is read.
function(_grove_algorithms_exec_test)
  if(TARGET grove_test_harness AND TARGET grove_exec AND TARGET grove_kernels
     AND TARGET grove_transport_loopback)
    grove_gtest(test_algorithms_exec
                SOURCES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/algorithms_exec_test.cc
                LIBS grove_algorithms grove_exec grove_kernels grove_transports
                     grove_test_harness grove_base
                LABELS unit TIMEOUT 180)
    grove_gtest(test_tree_algorithms_exec
                SOURCES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/tree_algorithms_exec_test.cc
                LIBS grove_algorithms grove_exec grove_kernels grove_transport_loopback
                     grove_test_harness grove_base
                LABELS unit TIMEOUT 300)
    if(TARGET grove_topology)
      grove_gtest(test_tree_plans
                  SOURCES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/tree_plans_test.cc
                  LIBS grove_algorithms grove_topology grove_exec grove_kernels
                       grove_transport_loopback grove_test_harness grove_base
                  LABELS unit TIMEOUT 300)
      target_compile_definitions(test_tree_plans PRIVATE
                                 GROVE_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
    endif()
  endif()
endfunction()
cmake_language(DEFER CALL _grove_algorithms_exec_test)
