# Pure tests of examples/sgd_trainer (model gradients, buckets, data split,
# options). The multi-process tests are in ../multiproc/sgd_trainer.cmake.
if(TARGET grove_sgd_core)
  grove_gtest(test_sgd_model SOURCES ${CMAKE_CURRENT_LIST_DIR}/sgd_model_test.cc
              LIBS grove_sgd_core LABELS unit TIMEOUT 60)
endif()
