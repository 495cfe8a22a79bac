grove_gtest(test_shm SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_test.cc ${CMAKE_CURRENT_LIST_DIR}/shm_slots_test.cc
            LIBS grove_transport_shm
            LABELS unit)
grove_gtest(test_eager SOURCES ${CMAKE_CURRENT_LIST_DIR}/eager_test.cc
            LIBS grove_exec grove_transport_shm grove_algorithms LABELS unit)
