# The topology layer: model, paths, JSON / NCCL XML files, fixtures of real
# machines (tests/fixtures/topology), rank placement and the comm merge.
if(TARGET grove_topology)
  grove_gtest(test_topology
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/topology_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/topology_files_test.cc
              LIBS grove_topology grove_base LABELS unit)
  target_compile_definitions(test_topology PRIVATE
                             GROVE_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
endif()
if(TARGET grove_topology)
  grove_gtest(test_link_addresses SOURCES ${CMAKE_CURRENT_LIST_DIR}/link_addresses_test.cc
              LIBS grove_topology grove_base LABELS unit)
  target_compile_definitions(test_link_addresses PRIVATE
                             GROVE_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
endif()
