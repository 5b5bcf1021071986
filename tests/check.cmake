# `ghfit check` (tests/check.sh): every bad-input case of the corpus that needs
# no fit gives check's exit 2 and the run's own error line, nothing created;
# what check accepts and reports; under 2 s on 1e8-row files.
add_test(NAME cli_check COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/cli_check)
set_tests_properties(cli_check PROPERTIES LABELS "cli" TIMEOUT 600 ENVIRONMENT "${GHF_MPI_ENV}")
# `ghfit check eval|gof|sample|risk` (tests/check_post.sh): a valid call of each exits 0, creates
# nothing and the command then runs; each bad input gives check's exit 2 and the command's own
# error line (mpirun -np 1), nothing created.
add_test(NAME cli_check_post COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_post.sh $<TARGET_FILE:ghfit>
         ${CMAKE_BINARY_DIR}/work/cli_check_post)
set_tests_properties(cli_check_post PROPERTIES LABELS "cli;mpi" TIMEOUT 300 ENVIRONMENT "${GHF_MPI_ENV}")
