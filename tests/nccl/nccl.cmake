# The NCCL ABI library (bindings/nccl) against NCCL itself: test_nccl_shim
# compares its ABI and exports with the CUDA toolkit's nccl.h and
# libnccl.so.2 where the build finds them, and runs nccl_client -- an NCCL
# program built against that nccl.h and linked to NCCL's own library -- on
# grove's libnccl.so.2 over the emulated device.
if(TARGET grove_nccl AND TARGET grove-launch)
  set(_nc ${CMAKE_CURRENT_LIST_DIR})
  find_path(GROVE_NCCL_ORACLE_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            PATHS /usr/local/cuda/include)
  find_path(GROVE_CUDA_RUNTIME_INCLUDE cuda_runtime.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            PATHS /usr/local/cuda/include)
  find_library(GROVE_NCCL_ORACLE_LIB NAMES libnccl.so.2 nccl HINTS ${CUDAToolkit_LIBRARY_DIR}
               PATHS /usr/local/cuda/lib /usr/local/cuda/lib64)
  set(_oracle OFF)
  if(GROVE_NCCL_ORACLE_INCLUDE AND GROVE_CUDA_RUNTIME_INCLUDE)
    set(_oracle ON)
  endif()

  add_executable(nccl_client ${_nc}/nccl_client.cc)
  add_dependencies(nccl_client grove_nccl)
  if(_oracle)
    target_include_directories(nccl_client PRIVATE ${GROVE_NCCL_ORACLE_INCLUDE} ${GROVE_CUDA_RUNTIME_INCLUDE})
    target_compile_definitions(nccl_client PRIVATE NCCL_CLIENT_HEADER=<nccl.h>)
  else()
    target_include_directories(nccl_client PRIVATE ${PROJECT_SOURCE_DIR}/bindings/nccl)
    target_compile_definitions(nccl_client PRIVATE NCCL_CLIENT_HEADER="nccl_abi.h")
  endif()
  if(_oracle AND GROVE_NCCL_ORACLE_LIB)
    target_link_libraries(nccl_client PRIVATE ${GROVE_NCCL_ORACLE_LIB} ${CMAKE_DL_LIBS})
  else()
    target_link_libraries(nccl_client PRIVATE grove_nccl ${CMAKE_DL_LIBS})
  endif()

  grove_gtest(test_nccl_shim
    SOURCES ${_nc}/nccl_shim_test.cc ${_nc}/abi_shim.cc ${_nc}/abi_oracle.cc
    LABELS multiproc nccl TIMEOUT 300 PROCESSORS 2)
  target_include_directories(test_nccl_shim PRIVATE ${PROJECT_SOURCE_DIR}/bindings/nccl)
  if(_oracle)
    # abi_oracle.cc alone sees NCCL's header (and CUDA's, which it includes)
    set_source_files_properties(${_nc}/abi_oracle.cc PROPERTIES
      COMPILE_DEFINITIONS GROVE_NCCL_ORACLE
      INCLUDE_DIRECTORIES "${GROVE_NCCL_ORACLE_INCLUDE};${GROVE_CUDA_RUNTIME_INCLUDE}")
  endif()
  set(_oracle_lib "")
  if(GROVE_NCCL_ORACLE_LIB)
    set(_oracle_lib ${GROVE_NCCL_ORACLE_LIB})
  endif()
  target_compile_definitions(test_nccl_shim PRIVATE
    GROVE_LAUNCH_PATH="$<TARGET_FILE:grove-launch>"
    GROVE_NCCL_CLIENT_PATH="$<TARGET_FILE:nccl_client>"
    GROVE_NCCL_SHIM_LIB="$<TARGET_FILE:grove_nccl>"
    GROVE_NCCL_SHIM_DIR="$<TARGET_FILE_DIR:grove_nccl>"
    GROVE_NCCL_ORACLE_LIB="${_oracle_lib}")
  add_dependencies(test_nccl_shim nccl_client grove_nccl grove-launch)
endif()
