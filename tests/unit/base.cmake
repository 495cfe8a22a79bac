grove_gtest(test_base SOURCES ${CMAKE_CURRENT_LIST_DIR}/base_test.cc LIBS grove_base LABELS unit)
