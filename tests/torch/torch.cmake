# The torch.distributed backend's tests (pytest, real processes). They run
# when the backend was built (Torch found, see bindings/torch); otherwise one
# placeholder test reports them skipped, with the reason.
if(TARGET grove_torch AND GROVE_TORCH_PYTHON)
  execute_process(COMMAND ${GROVE_TORCH_PYTHON} -c "import pytest"
                  RESULT_VARIABLE _grove_pytest_rc OUTPUT_QUIET ERROR_QUIET)
endif()
if(TARGET grove_torch AND GROVE_TORCH_PYTHON AND _grove_pytest_rc EQUAL 0)
  # One ctest test per file, so ctest -j2 spreads them; each starts up to 4
  # ranks, so each claims both CPUs of the test machines.
  foreach(name collectives ddp elastic failures gathered_ops p2p rendezvous torchft upstream_suite)
    add_test(NAME torch.${name}
             COMMAND ${GROVE_TORCH_PYTHON} -m pytest -q -p no:cacheprovider
                     ${CMAKE_CURRENT_LIST_DIR}/test_${name}.py
             WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
    set_tests_properties(torch.${name} PROPERTIES
      ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;OMP_NUM_THREADS=1"
      LABELS torch PROCESSORS 2 TIMEOUT 600)
  endforeach()
else()
  if(NOT GROVE_HAVE_TORCH)
    set(_why "torch was not found at configure time (scripts/install-deps makes .venv with torch, pybind11 and pytest)")
  elseif(NOT TARGET grove_torch)
    set(_why "the grove.torch extension is not built (see the CMake warnings)")
  else()
    set(_why "pytest is missing for ${GROVE_TORCH_PYTHON} (scripts/install-deps installs it in .venv)")
  endif()
  add_test(NAME torch.skipped COMMAND ${CMAKE_COMMAND} -E echo "torch tests skipped: ${_why}")
  set_tests_properties(torch.skipped PROPERTIES LABELS torch SKIP_REGULAR_EXPRESSION "torch tests skipped")
endif()
