# Observation weights (weighted EM: --weights, --halflife, job keys weights
# and halflife): integer weights == repeated rows (GH, NIG), weights of 1 ==
# the unweighted fit bitwise, 1-4 ranks, --halflife in a rolling sweep ==
# separate fits, bad input (tests/weights.sh).
add_test(NAME fit_weights COMMAND bash ${CMAKE_SOURCE_DIR}/tests/weights.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_weights)
set_tests_properties(fit_weights PROPERTIES LABELS "mpi;em" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
