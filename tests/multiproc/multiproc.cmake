# Multi-process tier: real processes and real transports on one machine.
#   grove_mp_check        the rank program (public API only: links grove)
#   test_mp_matrix        grove-launch -n N -- grove_mp_check, N in {1,2,3,4,8} x {shm,socket}
#   test_mp_failure       killed / silent / refused ranks
#   test_mp_elastic       shrink after kill -9, revoke in flight, grow back (grove_mp_elastic ranks)
#   test_mp_trees         GROVE_ALGO=tree / hier runs of allreduce, broadcast, reduce
#   test_mp_api           in-process API tests (ranks as threads)
#   test_mp_link_addresses  all-reduce over a K4 whose links carry 127/8 addresses
#   test_mp_planned_routes  tree all-reduce whose planned routes open their own connections
#   test_mp_device        every collective on CUDA communicators over the emulated device
# Run with: ctest --test-dir <build> -L multiproc
set(_mp ${CMAKE_CURRENT_LIST_DIR})

if(TARGET grove)
  add_executable(grove_mp_check ${_mp}/grove_mp_check.cc ${_mp}/mp_cases.cc)
  # grove_dtype (stateless: the types' facts, element values) beside libgrove.so.
  target_link_libraries(grove_mp_check PRIVATE grove grove_dtype)
  add_executable(grove_mp_elastic ${_mp}/grove_mp_elastic.cc)
  target_link_libraries(grove_mp_elastic PRIVATE grove)

  grove_gtest(test_mp_api
    SOURCES ${_mp}/mp_api_errors_test.cc ${_mp}/mp_api_features_test.cc ${_mp}/mp_api_device_test.cc
            ${_mp}/mp_api_lifecycle_test.cc ${_mp}/mp_call_tags_test.cc
            ${_mp}/mp_soak_test.cc ${_mp}/mp_api_one_sided_test.cc
            ${_mp}/mp_api_elastic_test.cc
    LIBS grove
    LABELS multiproc
    TIMEOUT 120)

  if(TARGET grove-launch)
    # A test that runs grove_mp_check jobs under grove-launch (paths compiled
    # in, the fixture folder too), two CPUs' worth of ranks.
    function(grove_mp_launch_test name source timeout)
      grove_gtest(${name} SOURCES ${_mp}/${source} LABELS multiproc TIMEOUT ${timeout} PROCESSORS 2)
      target_compile_definitions(${name} PRIVATE
        GROVE_LAUNCH_PATH="$<TARGET_FILE:grove-launch>"
        GROVE_MP_CHECK_PATH="$<TARGET_FILE:grove_mp_check>"
        GROVE_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
      add_dependencies(${name} grove_mp_check grove-launch)
    endfunction()
    grove_mp_launch_test(test_mp_matrix mp_matrix_test.cc 300)
    grove_mp_launch_test(test_mp_failure mp_failure_test.cc 120)
    grove_mp_launch_test(test_mp_elastic mp_elastic_test.cc 300)
    target_compile_definitions(test_mp_elastic PRIVATE
      GROVE_MP_ELASTIC_PATH="$<TARGET_FILE:grove_mp_elastic>")
    add_dependencies(test_mp_elastic grove_mp_elastic)
    grove_mp_launch_test(test_mp_trees mp_tree_test.cc 300)
    grove_mp_launch_test(test_mp_link_addresses mp_link_addr_test.cc 300)
    grove_mp_launch_test(test_mp_planned_routes mp_planned_routes_test.cc 300)
    grove_mp_launch_test(test_mp_device mp_device_test.cc 600)
  endif()
endif()
