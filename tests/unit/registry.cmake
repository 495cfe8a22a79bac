# The transport registry extended at run time: a throw-away transport, one
# row, carries communicators with no core change. Its own program: the test
# registers before any communicator reads the registry.
if(TARGET grove_capi)
  grove_gtest(test_registry_extension
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/registry_extension_test.cc
              LIBS grove_capi LABELS unit PROCESSORS 2 TIMEOUT 120)
endif()
