# EM driver, sampler and the fit command.
ghf_unit_test(NAME test_sample SOURCES tests/test_sample.c LABELS em TIMEOUT 120)
ghf_unit_test(NAME test_em SOURCES tests/test_em.c LABELS em TIMEOUT 900)
add_executable(h5get tests/h5get.c)
target_link_libraries(h5get PRIVATE ghfit_core PkgConfig::HDF5)
add_test(NAME fit_ranks_1to4 COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fit_ranks.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_ranks)
set_tests_properties(fit_ranks_1to4 PROPERTIES LABELS "mpi;em" TIMEOUT 900 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
add_test(NAME cli_bad_input COMMAND bash ${CMAKE_SOURCE_DIR}/tests/bad_input.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/bad_input)
set_tests_properties(cli_bad_input PROPERTIES LABELS "cli;em" TIMEOUT 600 ENVIRONMENT "${GHF_MPI_ENV}")
ghf_unit_test(NAME test_cpu_estep SOURCES tests/test_cpu_estep.c LABELS em TIMEOUT 300)
# Reproducible sums (kernels/xsum.h, src/dist/xreduce.c): any order, any grouping,
# any rank count gives the same bits.
ghf_unit_test(NAME test_xsum SOURCES tests/test_xsum.c LABELS em TIMEOUT 60)
foreach(np 2 3)
  ghf_mpi_test(NAME test_xsum_np${np} NP ${np} COMMAND $<TARGET_FILE:test_xsum> LABELS em TIMEOUT 60)
endforeach()
# Numerically hostile data on 1-4 ranks: same status, iterations and
# log-likelihood, a monotone trace, GH >= NIG (tests/fit_adversarial.sh).
add_test(NAME fit_adversarial COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fit_adversarial.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_adversarial)
set_tests_properties(fit_adversarial PROPERTIES LABELS "mpi;em" TIMEOUT 900 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
add_test(NAME fit_families COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fit_families.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_families)
set_tests_properties(fit_families PROPERTIES LABELS "mpi;em" TIMEOUT 900 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
