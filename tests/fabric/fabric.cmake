# Emulated-fabric tier: grove over network namespaces, veth pairs and tc rate
# limits (tests/fabric/README.md). The plan test is pure Python and always
# runs; the others need root, iproute2 and namespaces, and report themselves
# skipped (exit 77, with the reason) otherwise. They share the namespaces of
# fabric id 9, so a RESOURCE_LOCK keeps them from running at once.
# Run with: ctest --test-dir <build> -L fabric
find_program(GROVE_FABRIC_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT GROVE_FABRIC_PYTHON)
  find_program(GROVE_FABRIC_PYTHON NAMES python3)
endif()
set(_fab ${CMAKE_CURRENT_LIST_DIR})

if(GROVE_FABRIC_PYTHON)
  add_test(NAME fabric.plan COMMAND ${GROVE_FABRIC_PYTHON} ${_fab}/test_plan.py)
  set_tests_properties(fabric.plan PROPERTIES LABELS fabric TIMEOUT 60)
  if(TARGET grove-topo)
    set_property(TEST fabric.plan APPEND PROPERTY
                 ENVIRONMENT "GROVE_TOPO_TOOL=$<TARGET_FILE:grove-topo>")
  endif()

  if(TARGET grove-launch AND TARGET grove_mp_check AND TARGET all_reduce_perf)
    foreach(name collectives cut kill)
      add_test(NAME fabric.${name}
               COMMAND ${GROVE_FABRIC_PYTHON} ${_fab}/fabric_test.py ${name}
                       --build ${CMAKE_BINARY_DIR} --id 9)
      set_tests_properties(fabric.${name} PROPERTIES
        LABELS fabric SKIP_RETURN_CODE 77 RESOURCE_LOCK grove_fabric_id9
        PROCESSORS 2 TIMEOUT 300)
    endforeach()
    # The libfabric net transport over its tcp provider, on the same fabric.
    if(GROVE_HAVE_LIBFABRIC)
      foreach(name collectives cut kill)
        add_test(NAME fabric.net.${name}
                 COMMAND ${GROVE_FABRIC_PYTHON} ${_fab}/fabric_test.py ${name} --transport net
                         --fabrics k4,dgx1v-015 --build ${CMAKE_BINARY_DIR} --id 9)
        set_tests_properties(fabric.net.${name} PROPERTIES
          LABELS fabric SKIP_RETURN_CODE 77 RESOURCE_LOCK grove_fabric_id9
          PROCESSORS 2 TIMEOUT 300)
      endforeach()
    endif()
  endif()
endif()

# Open MPI over the same fabric, when grove's own MPI check found it
# (GROVE_HAVE_MPI, from MPI_C_FOUND: another package's CMake files, Torch's
# among them, may define MPI::MPI_C where no mpi.h is installed).
if(GROVE_FABRIC_PYTHON AND GROVE_HAVE_MPI)
  add_executable(fabric_mpi_check ${_fab}/fabric_mpi_check.c)
  target_link_libraries(fabric_mpi_check PRIVATE MPI::MPI_C)
  add_test(NAME fabric.mpi
           COMMAND ${GROVE_FABRIC_PYTHON} ${_fab}/fabric_test.py mpi --build ${CMAKE_BINARY_DIR} --id 9
                   --mpi-check $<TARGET_FILE:fabric_mpi_check>)
  set_tests_properties(fabric.mpi PROPERTIES
    LABELS fabric SKIP_RETURN_CODE 77 RESOURCE_LOCK grove_fabric_id9 PROCESSORS 2 TIMEOUT 300)
endif()
