# examples/sgd_trainer end to end: N-rank training vs an in-process 1-rank
# reference, loss, --check, overlap, torchrun variables, bad input.
if(TARGET sgd_trainer AND TARGET grove-launch)
  grove_gtest(test_sgd_trainer
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/sgd_trainer_test.cc
    LIBS grove_sgd_core
    LABELS multiproc
    TIMEOUT 300
    PROCESSORS 2)
  target_include_directories(test_sgd_trainer PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_compile_definitions(test_sgd_trainer PRIVATE
    GROVE_LAUNCH_PATH="$<TARGET_FILE:grove-launch>"
    SGD_TRAINER_PATH="$<TARGET_FILE:sgd_trainer>")
  add_dependencies(test_sgd_trainer sgd_trainer grove-launch)
endif()
