# The planner mathematics: plan graph, max flow and bounds, ring search, tree
# packing, heterogeneous split and hierarchical plans, on every fixture.
if(TARGET grove_topology)
  grove_gtest(test_planner
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/planner_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/planner_graphs_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/planner_optimum_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/plan_store_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/fair_share_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/tree_sizes_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/forest_test.cc
              LIBS grove_algorithms grove_topology grove_base LABELS unit TIMEOUT 300)
  target_compile_definitions(test_planner PRIVATE
                             GROVE_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
endif()
