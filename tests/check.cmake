# `ghfit check` (tests/check.sh): every bad-input case of the corpus that needs
# no fit gives check's exit 2 and the run's own error line, nothing created;
# what check accepts and reports; under 2 s on 1e8-row files.
add_test(NAME cli_check COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/cli_check)
set_tests_properties(cli_check PROPERTIES LABELS "cli" TIMEOUT 600 ENVIRONMENT "${GHF_MPI_ENV}")
