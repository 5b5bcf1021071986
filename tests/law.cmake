# The univariate laws of a fit (src/law/uni1d.c): cdf, quantiles, VaR, ES
# against 40-digit mpmath references (tests/data/uni1d_ref.csv).
ghf_unit_test(NAME test_uni1d SOURCES tests/test_uni1d.c LABELS law TIMEOUT 120)
# ghfit risk: 1-3 ranks give the same bits, the file's layout, bad input on 2 ranks
add_test(NAME cli_risk COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_risk.sh $<TARGET_FILE:ghfit>
         ${CMAKE_BINARY_DIR}/work/cli_risk)
set_tests_properties(cli_risk PROPERTIES LABELS "cli;law;mpi" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
# goodness of fit (src/law/gof.c): p-values, noncentral chi-square, radial law, interpolated PITs
ghf_unit_test(NAME test_gof SOURCES tests/test_gof.c LABELS law TIMEOUT 120)
target_link_libraries(test_gof PRIVATE PkgConfig::GSL)
# the parallel sort (src/dist/psort.c) and the distributed gof pieces (src/pipeline/gofdist.c): sorted,
# every row once, the same bits as the serial statistics and PITs, on 1-4 ranks with uneven shards and ties
ghf_unit_test(NAME test_psort SOURCES tests/test_psort.c LABELS law TIMEOUT 60)
foreach(np 2 3 4)
  ghf_mpi_test(NAME test_psort_np${np} NP ${np} COMMAND $<TARGET_FILE:test_psort> LABELS law TIMEOUT 60)
endforeach()
# ghfit gof: sampled data not rejected, t(3) data fitted as gauss rejected, 1 and 2 ranks, bad input
add_test(NAME cli_gof COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_gof.sh $<TARGET_FILE:ghfit>
         ${CMAKE_BINARY_DIR}/work/cli_gof)
set_tests_properties(cli_gof PROPERTIES LABELS "cli;law;mpi" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
# ghfit gof on 1, 2, 3 and 4 ranks: the same file bit for bit (exact and interpolated PITs, ties, uneven shards)
add_test(NAME cli_gofdist COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_gofdist.sh $<TARGET_FILE:ghfit>
         ${CMAKE_BINARY_DIR}/work/cli_gofdist)
set_tests_properties(cli_gofdist PROPERTIES LABELS "cli;law;mpi;sanitize" TIMEOUT 300 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
# ghfit gof --bootstrap and the job key gof: p-values in range, 1 and 3 ranks the same bits, t(3) data
# fitted as gauss rejected, failed refits counted, the job key equals ghfit gof on 1 and 2 ranks, bad input
add_test(NAME cli_gofboot COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_gofboot.sh $<TARGET_FILE:ghfit>
         ${CMAKE_BINARY_DIR}/work/cli_gofboot)
set_tests_properties(cli_gofboot PROPERTIES LABELS "cli;law;mpi" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
# ghfit optimize's core (src/law/portopt.c): gradients of sd/VaR/ES against finite differences, KKT and
# random feasible portfolios for every family at d = 3 and 10, the Gaussian closed forms, frontiers
ghf_unit_test(NAME test_portopt SOURCES tests/test_portopt.c LABELS law TIMEOUT 300)
# ghfit optimize: 1-3 ranks give the same bits, the file's layout, the constraints held, bad input on 2 ranks
# (and ghfit check optimize with the same line)
add_test(NAME cli_optimize COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_optimize.sh $<TARGET_FILE:ghfit>
         ${CMAKE_BINARY_DIR}/work/cli_optimize)
set_tests_properties(cli_optimize PROPERTIES LABELS "cli;law;mpi" TIMEOUT 300 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
