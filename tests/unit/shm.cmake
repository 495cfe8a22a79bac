grove_gtest(test_shm SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_test.cc LIBS grove_transport_shm
            LABELS unit)
