# Using a fitted law (issue 11): `ghfit eval` on every family and 1-4 ranks,
# and `ghfit sample` (reproducibility, a refit recovers the law).
ghf_unit_test(NAME test_score_pass SOURCES tests/test_score_pass.c LABELS score TIMEOUT 120)
add_test(NAME eval_families COMMAND bash ${CMAKE_SOURCE_DIR}/tests/eval.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/eval_families)
set_tests_properties(eval_families PROPERTIES LABELS "mpi;score" TIMEOUT 900 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
add_test(NAME sample_refit COMMAND bash ${CMAKE_SOURCE_DIR}/tests/sample.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/sample_refit)
set_tests_properties(sample_refit PROPERTIES LABELS "mpi;score" TIMEOUT 900 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
# job keys after the fits (src/pipeline/postfit.c): risk with a rolling
# backtest (Kupiec) and eval: next / FILE, 1 and 2 ranks, bad keys
add_test(NAME jobpost COMMAND bash ${CMAKE_SOURCE_DIR}/tests/jobpost.sh $<TARGET_FILE:ghfit> ${CMAKE_BINARY_DIR}/work/jobpost)
set_tests_properties(jobpost PROPERTIES LABELS "mpi;batch;score" TIMEOUT 300 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
# the commands that read a mixture fit (issue 23): eval, sample, risk,
# summary, refusals, check, on files of tests/make_mixture_fit.py
add_test(NAME mixture_readers COMMAND bash ${CMAKE_SOURCE_DIR}/tests/mixture_readers.sh $<TARGET_FILE:ghfit>
         ${CMAKE_BINARY_DIR}/work/mixture_readers)
set_tests_properties(mixture_readers PROPERTIES LABELS "mpi;score" TIMEOUT 300 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
