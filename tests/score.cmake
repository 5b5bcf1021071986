# Using a fitted law (issue 11): `ghfit eval` on every family and 1-4 ranks,
# and `ghfit sample` (reproducibility, a refit recovers the law).
add_test(NAME eval_families COMMAND bash ${CMAKE_SOURCE_DIR}/tests/eval.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/eval_families)
set_tests_properties(eval_families PROPERTIES LABELS "mpi;score" TIMEOUT 900 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
add_test(NAME sample_refit COMMAND bash ${CMAKE_SOURCE_DIR}/tests/sample.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/sample_refit)
set_tests_properties(sample_refit PROPERTIES LABELS "mpi;score" TIMEOUT 900 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
