# Missing coordinates (--missing em): the E-step of a row with missing
# entries against direct integration of the full density (test_missing.c),
# and the fit end to end (tests/missing.sh).
ghf_unit_test(NAME test_missing SOURCES tests/test_missing.c LABELS em TIMEOUT 120)
add_test(NAME fit_missing COMMAND bash ${CMAKE_SOURCE_DIR}/tests/missing.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_missing)
set_tests_properties(fit_missing PROPERTIES LABELS "mpi;em" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
