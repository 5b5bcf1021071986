# Missing coordinates (--missing em): the E-step of a row with missing
# entries against direct integration of the full density (test_missing.c),
# the fit end to end (tests/missing.sh), and a staggered panel's held-back
# entries scored under the em and the drop fits (tests/missing_heldback.py).
# fit_missing carries the label sanitize: the sanitizer build runs it too (its
# 4-rank case has a rank without rows: UBSan found a memcpy to NULL there).
ghf_unit_test(NAME test_missing SOURCES tests/test_missing.c LABELS em TIMEOUT 120)
add_test(NAME fit_missing COMMAND bash ${CMAKE_SOURCE_DIR}/tests/missing.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_missing)
set_tests_properties(fit_missing PROPERTIES LABELS "mpi;em;sanitize" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
add_test(NAME missing_heldback COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/missing_heldback.py
         $<TARGET_FILE:ghfit> ${CMAKE_BINARY_DIR}/work/missing_heldback)
set_tests_properties(missing_heldback PROPERTIES LABELS "mpi;em" TIMEOUT 300 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
