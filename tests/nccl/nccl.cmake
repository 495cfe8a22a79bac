# The NCCL ABI library (bindings/nccl) against NCCL itself, every version
# at hand: the CUDA toolkit's nccl.h and libnccl.so.2, the nvidia-nccl-cu13
# wheel that torch depends on (in .venv), and the newest one the shim
# implements (scripts/install-deps puts it in .venv/share/nccl-oracles), plus
# any folder named in GROVE_NCCL_ORACLE_DIRS (each holding include/nccl.h
# and lib/libnccl.so.2). For each version: nccl_abi_<v> prints its header's
# ABI rows, and nccl_client_<v> -- an NCCL program built against that
# nccl.h and linked to that libnccl.so.2 -- runs on grove's libnccl.so.2 on
# the emulated device. test_nccl_shim compares rows and exports with each
# and runs each client.
if(TARGET grove_nccl AND TARGET grove-launch)
  set(_nc ${CMAKE_CURRENT_LIST_DIR})
  set(_client_sources ${_nc}/nccl_client.cc ${_nc}/nccl_client_util.cc
                      ${_nc}/nccl_client_current.cc)
  find_path(GROVE_CUDA_RUNTIME_INCLUDE cuda_runtime.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            PATHS /usr/local/cuda/include)
  find_path(GROVE_NCCL_TOOLKIT_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            PATHS /usr/local/cuda/include)
  find_library(GROVE_NCCL_TOOLKIT_LIB NAMES libnccl.so.2 nccl HINTS ${CUDAToolkit_LIBRARY_DIR}
               PATHS /usr/local/cuda/lib /usr/local/cuda/lib64)
  set(GROVE_NCCL_ORACLE_DIRS "" CACHE STRING
      "More NCCL installs to test grove's libnccl.so.2 against (folders with include/ and lib/)")

  # Candidates as include-folder|library pairs.
  set(_cands)
  if(GROVE_NCCL_TOOLKIT_INCLUDE AND GROVE_NCCL_TOOLKIT_LIB)
    list(APPEND _cands "${GROVE_NCCL_TOOLKIT_INCLUDE}|${GROVE_NCCL_TOOLKIT_LIB}")
  endif()
  file(GLOB _wheels ${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/nvidia/nccl
                    ${PROJECT_SOURCE_DIR}/.venv/share/nccl-oracles/*/nvidia/nccl)
  foreach(_d ${_wheels} ${GROVE_NCCL_ORACLE_DIRS})
    if(EXISTS ${_d}/include/nccl.h AND EXISTS ${_d}/lib/libnccl.so.2)
      list(APPEND _cands "${_d}/include|${_d}/lib/libnccl.so.2")
    endif()
  endforeach()

  set(_oracles "")       # what the test reads: version|client|abi|lib;...
  set(_versions "")
  if(GROVE_CUDA_RUNTIME_INCLUDE)
    foreach(_c ${_cands})
      string(REPLACE "|" ";" _pair "${_c}")
      list(GET _pair 0 _inc)
      list(GET _pair 1 _lib)
      file(STRINGS ${_inc}/nccl.h _defs REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
      set(_v "")
      foreach(_part MAJOR MINOR PATCH)
        string(REGEX MATCH "NCCL_${_part} ([0-9]+)" _m "${_defs}")
        list(APPEND _v ${CMAKE_MATCH_1})
      endforeach()
      string(REPLACE ";" "." _v "${_v}")
      if(_v IN_LIST _versions)
        continue()
      endif()
      list(APPEND _versions ${_v})
      string(REPLACE "." "_" _t "${_v}")
      # The oracle's folder before the CUDA runtime's, which may hold another nccl.h.
      add_executable(nccl_abi_${_t} ${_nc}/abi_oracle.cc)
      # (-I, not -isystem: a system folder would come after every -I.)
      # NCCL's headers are not written for -Wextra: their warnings are off.
      target_include_directories(nccl_abi_${_t} PRIVATE ${_inc} ${GROVE_CUDA_RUNTIME_INCLUDE}
                                 ${PROJECT_SOURCE_DIR}/tests)
      target_compile_options(nccl_abi_${_t} PRIVATE -w)
      add_executable(nccl_client_${_t} ${_client_sources})
      target_include_directories(nccl_client_${_t} PRIVATE ${_inc} ${GROVE_CUDA_RUNTIME_INCLUDE})
      target_compile_options(nccl_client_${_t} PRIVATE -Wno-missing-field-initializers
                                                       -Wno-unused-function)
      target_compile_definitions(nccl_client_${_t} PRIVATE NCCL_CLIENT_HEADER=<nccl.h>)
      target_link_libraries(nccl_client_${_t} PRIVATE ${_lib} ${CMAKE_DL_LIBS})
      add_dependencies(nccl_client_${_t} grove_nccl)
      list(APPEND _oracles
           "${_v}|$<TARGET_FILE:nccl_client_${_t}>|$<TARGET_FILE:nccl_abi_${_t}>|${_lib}")
      list(APPEND _oracle_targets nccl_client_${_t} nccl_abi_${_t})
    endforeach()
  endif()
  message(STATUS "NCCL versions the NCCL library is tested against: ${_versions}")

  # Without any NCCL: a client built against the shim's own header.
  add_executable(nccl_client ${_client_sources})
  add_dependencies(nccl_client grove_nccl)
  target_include_directories(nccl_client PRIVATE ${PROJECT_SOURCE_DIR}/bindings/nccl)
  target_compile_definitions(nccl_client PRIVATE NCCL_CLIENT_HEADER="nccl_abi.h")
  target_link_libraries(nccl_client PRIVATE grove_nccl ${CMAKE_DL_LIBS})
  # NCCL's initializers (NCCL_COMM_PROPERTIES_INITIALIZER) leave fields to zero on purpose.
  target_compile_options(nccl_client PRIVATE -Wno-missing-field-initializers)

  grove_gtest(test_nccl_shim
    SOURCES ${_nc}/nccl_shim_test.cc ${_nc}/abi_shim.cc
    LABELS multiproc nccl TIMEOUT 600 PROCESSORS 2)
  target_include_directories(test_nccl_shim PRIVATE ${PROJECT_SOURCE_DIR}/bindings/nccl)
  string(REPLACE ";" "," _oracles "${_oracles}")
  target_compile_definitions(test_nccl_shim PRIVATE
    GROVE_LAUNCH_PATH="$<TARGET_FILE:grove-launch>"
    GROVE_NCCL_CLIENT_PATH="$<TARGET_FILE:nccl_client>"
    GROVE_NCCL_SHIM_LIB="$<TARGET_FILE:grove_nccl>"
    GROVE_NCCL_SHIM_DIR="$<TARGET_FILE_DIR:grove_nccl>"
    GROVE_NCCL_ORACLES="${_oracles}")
  add_dependencies(test_nccl_shim nccl_client grove_nccl grove-launch ${_oracle_targets})
endif()

# The project's own torch imports and sees grove's NCCL with grove's
# libnccl.so.2 preloaded (torch_import.py).
if(TARGET grove_nccl AND GROVE_TORCH_PYTHON)
  add_test(NAME nccl.torch_import
           COMMAND ${CMAKE_COMMAND} -E env "LD_PRELOAD=$<TARGET_FILE:grove_nccl>"
                   ${GROVE_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/torch_import.py
                   $<TARGET_FILE:grove_nccl>)
  set_tests_properties(nccl.torch_import PROPERTIES LABELS "nccl;torch" TIMEOUT 300)
endif()
