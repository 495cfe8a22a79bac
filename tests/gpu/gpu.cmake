# GPU tier (docs/architecture.md, "Conventions"): built whenever nvcc is found, run where a
# GPU is present. Without one, each test prints "no CUDA device: GPU tests
# skipped" and exits 77, which ctest reports as Skipped.
# Run with: ctest --test-dir <build> -L gpu
if(NOT GROVE_HAVE_CUDA)
  # One placeholder reports the tier skipped, with the reason.
  add_test(NAME gpu.skipped COMMAND ${CMAKE_COMMAND} -E echo
           "GPU tests skipped: this build has no CUDA (GROVE_WITH_CUDA=${GROVE_WITH_CUDA}, or nvcc not found)")
  set_tests_properties(gpu.skipped PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "GPU tests skipped")
  return()
endif()
set(_gpu ${CMAKE_CURRENT_LIST_DIR})
add_executable(test_gpu_kernels ${_gpu}/gpu_kernels_test.cc ${_gpu}/gpu_slices_test.cc ${_gpu}/gpu_main.cc
               ${_gpu}/gpu_check.cc ${_gpu}/slice_kernels.cu)
target_link_libraries(test_gpu_kernels PRIVATE grove_exec grove_kernels grove_base CUDA::cudart
                      GTest::gtest)
target_include_directories(test_gpu_kernels PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
set_target_properties(test_gpu_kernels PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
set_source_files_properties(${_gpu}/slice_kernels.cu PROPERTIES COMPILE_OPTIONS "--fmad=false")
grove_cuda_host_flags(test_gpu_kernels)
foreach(area GpuReduceCopy GpuMultiSource GpuCopy GpuKernels GpuSlices)
  add_test(NAME gpu.${area} COMMAND test_gpu_kernels --gtest_filter=${area}.*)
  set_tests_properties(gpu.${area} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
                       RESOURCE_LOCK grove_gpu)
endforeach()

# The CUDA executor (src/exec/cuda): N ranks on the one GPU against the host
# executor, stream ordering, groups, abort, timeout, closed peers.
add_executable(test_gpu_executor ${_gpu}/gpu_executor_test.cc ${_gpu}/gpu_exec_harness.cc ${_gpu}/gpu_main.cc
               ${_gpu}/gpu_check.cc ${_gpu}/exec_kernels.cu)
target_link_libraries(test_gpu_executor PRIVATE grove_test_harness grove_algorithms grove_exec
                      grove_kernels grove_base CUDA::cudart GTest::gtest)
target_include_directories(test_gpu_executor PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
set_target_properties(test_gpu_executor PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
grove_cuda_host_flags(test_gpu_executor)
foreach(area ExecCollectives.SmallSizes ExecCollectives.LargeSizes ExecStream ExecGroup ExecAbort ExecApi)
  string(REPLACE "." "*" _filter "Gpu${area}")
  add_test(NAME gpu.${area} COMMAND test_gpu_executor --gtest_filter=*${_filter}*)
  set_tests_properties(gpu.${area} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
                       RESOURCE_LOCK grove_gpu)
endforeach()

# Every collective on CUDA communicators in 2, 3 and 4 processes sharing the
# GPU, over cuda_p2p and over host_staged (the perf binaries on device memory,
# results checked).
if(TARGET grove-launch AND TARGET all_reduce_perf)
  add_test(NAME gpu.Collectives
           COMMAND ${_gpu}/gpu_collectives.sh $<TARGET_FILE:grove-launch> $<TARGET_FILE_DIR:all_reduce_perf>)
  set_tests_properties(gpu.Collectives PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800
                       RESOURCE_LOCK grove_gpu)
endif()
