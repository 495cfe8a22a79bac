# Networking tests: socket utilities, unique ids, bootstrap, socket transport.
# The bootstrap sources are compiled in directly, so these tests do not need
# the whole core layer (and its dependencies) to build.
set(_grove_boot_sources ${PROJECT_SOURCE_DIR}/src/core/bootstrap.cc
    ${PROJECT_SOURCE_DIR}/src/core/bootstrap_root.cc ${PROJECT_SOURCE_DIR}/src/core/root_loop.cc
    ${PROJECT_SOURCE_DIR}/src/core/root_messages.cc ${PROJECT_SOURCE_DIR}/src/core/unique_id.cc
    ${PROJECT_SOURCE_DIR}/src/core/hang_doctor.cc ${PROJECT_SOURCE_DIR}/src/core/call_board.cc
    ${PROJECT_SOURCE_DIR}/src/exec/call_tag.cc)
grove_gtest(test_net_socket SOURCES ${CMAKE_CURRENT_LIST_DIR}/net_socket_test.cc
            LIBS grove_base LABELS unit)
grove_gtest(test_bootstrap SOURCES ${CMAKE_CURRENT_LIST_DIR}/bootstrap_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/hang_doctor_test.cc ${CMAKE_CURRENT_LIST_DIR}/call_board_test.cc
            ${_grove_boot_sources}
            LIBS grove_transport_shm grove_base LABELS unit)
if(TARGET grove_transport_socket)
  grove_gtest(test_socket_transport SOURCES ${CMAKE_CURRENT_LIST_DIR}/socket_transport_test.cc
              LIBS grove_transport_socket grove_base LABELS unit)
endif()
if(TARGET grove_transport_socket)
  grove_gtest(test_socket_link_addresses SOURCES ${CMAKE_CURRENT_LIST_DIR}/socket_link_address_test.cc
              LIBS grove_transport_socket grove_base LABELS unit)
endif()
# Every registered transport against the same contract (transports/registry.h).
grove_gtest(test_transport_conformance SOURCES ${CMAKE_CURRENT_LIST_DIR}/transport_conformance_test.cc
            LIBS grove_transports grove_test_harness grove_base LABELS unit PROCESSORS 2 TIMEOUT 300)
if(TARGET grove_transport_net)
  grove_gtest(test_net_one_sided SOURCES ${CMAKE_CURRENT_LIST_DIR}/net_one_sided_test.cc
              LIBS grove_transports grove_test_harness grove_base LABELS unit PROCESSORS 2)
endif()
