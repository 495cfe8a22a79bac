# Kernels, host executor, loopback transport, and the thread-ranks harness
# that other areas reuse to run programs on N in-process ranks.
add_library(grove_test_harness STATIC ${CMAKE_CURRENT_LIST_DIR}/harness/thread_ranks.cc)
target_include_directories(grove_test_harness PUBLIC ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(grove_test_harness PUBLIC grove_exec grove_transport_loopback grove_kernels
                      grove_base)

grove_gtest(test_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels_test.cc
            LIBS grove_kernels grove_base LABELS unit)
grove_gtest(test_executor SOURCES ${CMAKE_CURRENT_LIST_DIR}/executor_test.cc
                            ${CMAKE_CURRENT_LIST_DIR}/executor_fanout_test.cc
                            ${CMAKE_CURRENT_LIST_DIR}/loopback_test.cc
            LIBS grove_test_harness grove_transport_socket LABELS unit TIMEOUT 180)
grove_gtest(test_executor_fanin SOURCES ${CMAKE_CURRENT_LIST_DIR}/executor_fanin_test.cc
                                  ${CMAKE_CURRENT_LIST_DIR}/executor_lowered_test.cc
            LIBS grove_test_harness grove_algorithms LABELS unit TIMEOUT 180)
