# grove_layer(NAME SOURCES... [DEPS targets...]): one layer's static library.
function(grove_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${L_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}
                             ${PROJECT_SOURCE_DIR}/src ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(${name} PUBLIC Threads::Threads ${L_DEPS})
endfunction()

# grove_gtest(NAME SOURCES... [LIBS ...] [LABELS ...] [TIMEOUT s] [PROCESSORS n]):
# a GoogleTest executable whose tests ctest discovers one by one. PROCESSORS
# tells ctest -j how many CPUs each test occupies (multi-rank tests use all).
function(grove_gtest name)
  cmake_parse_arguments(T "" "TIMEOUT;PROCESSORS" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/tests)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(NOT T_PROCESSORS)
    set(T_PROCESSORS 1)
  endif()
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
                       PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}" PROCESSORS ${T_PROCESSORS})
endfunction()
