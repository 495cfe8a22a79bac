# The house rules, checked like any other contract: the layer include rules
# of the READMEs (check_layers.py, and its own test on made-up trees) and the
# code format (.clang-format; skipped where clang-format 14 is absent).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME house.layers
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_layers.py ${PROJECT_SOURCE_DIR})
  add_test(NAME house.layers_checker
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_layers_test.py)
  set_tests_properties(house.layers house.layers_checker PROPERTIES LABELS "unit;house" TIMEOUT 60)
endif()
add_test(NAME house.format COMMAND ${PROJECT_SOURCE_DIR}/scripts/format --check)
set_tests_properties(house.format PROPERTIES LABELS "unit;house" TIMEOUT 300 SKIP_RETURN_CODE 77)
