# Packaging tier: the installed tree works for a user outside the source tree
# (install.consumer), and the bare build -- every optional feature off, as
# scripts/install-deps --minimal leaves a machine -- configures and builds its
# library and grove-info (install.minimal_build).
add_test(NAME install.consumer
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_install.sh ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(install.consumer PROPERTIES LABELS install TIMEOUT 300 PROCESSORS 2)

add_test(NAME install.minimal_build
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_minimal_build.sh ${CMAKE_BINARY_DIR}/minimal
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(install.minimal_build PROPERTIES LABELS install TIMEOUT 900 PROCESSORS 2)
