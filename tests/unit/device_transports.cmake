# Device transports (host_staged, cuda_p2p) and the communicator's device
# links (core/device_connections.h). Without a GPU these run host_staged's
# emulation mode; cuda_p2p's test (CUDA builds) checks its clean failure.
grove_gtest(test_host_staged SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_staged_test.cc
            LIBS grove_transport_host_staged LABELS unit PROCESSORS 2)
grove_gtest(test_device_path SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_path_test.cc
            LIBS grove_core LABELS unit)
grove_gtest(test_device_connections SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_connections_test.cc
            LIBS grove_core grove_test_harness LABELS unit PROCESSORS 2 TIMEOUT 300)
if(TARGET grove_transport_cuda_p2p)
  grove_gtest(test_cuda_p2p SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_p2p_test.cc
              LIBS grove_transport_cuda_p2p LABELS unit)
endif()
