# The cost model (flow simulator, predictions, selection table) and grove-plan.
if(TARGET grove_topology)
  grove_gtest(test_cost_model
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/cost_model_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/plan_threads_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/tree_vertices_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/forest_split_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/fair_fill_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/flow_sim_test.cc
                      ${CMAKE_CURRENT_LIST_DIR}/tuning_share_test.cc
              LIBS grove_algorithms grove_topology grove_transports grove_base LABELS unit)
  target_compile_definitions(test_cost_model PRIVATE
                             GROVE_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
endif()

if(TARGET grove-plan)
  grove_gtest(test_plan_tool
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/plan_tool_test.cc
              LIBS grove_topology grove_base LABELS unit TIMEOUT 300)
  target_compile_definitions(test_plan_tool PRIVATE
                             GROVE_PLAN_PATH="$<TARGET_FILE:grove-plan>"
                             GROVE_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
  add_dependencies(test_plan_tool grove-plan)
endif()
