# EM driver, sampler and the fit command.
ghf_unit_test(NAME test_sample SOURCES tests/test_sample.c LABELS em TIMEOUT 120)
ghf_unit_test(NAME test_em SOURCES tests/test_em.c LABELS em TIMEOUT 900)
# the mixture EM in one process (src/em/em_mixture.c): also under the sanitizer build
ghf_unit_test(NAME test_mixture SOURCES tests/test_mixture.c LABELS em TIMEOUT 300)
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
# GH's nested NIG start stops when its log-likelihood changes by less than
# 1e-8 relative and is continued to --tol when it is
# the best start or GH ends close to it (tests/fit_nested.sh).
add_test(NAME fit_nested COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fit_nested.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_nested)
set_tests_properties(fit_nested PROPERTIES LABELS "mpi;em" TIMEOUT 300 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
# The subsample start of a large data set keeps GH >= NIG, on 1-4 ranks
# (tests/fit_sample.sh: fit_adversarial's data with the test hook
# GHFIT_TEST_SAMPLE, and 200000 GH rows without it).
add_test(NAME fit_sample COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fit_sample.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_sample)
set_tests_properties(fit_sample PROPERTIES LABELS "mpi;em" TIMEOUT 300 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
# One row at 1e6, 1e20 or FLT_MAX among 2001, every family, the row at the
# start, middle and end, 1 to 4 ranks (issue 25 item 2; tests/fit_extreme.sh).
add_test(NAME fit_extreme COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fit_extreme.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_extreme)
set_tests_properties(fit_extreme PROPERTIES LABELS "mpi;em" TIMEOUT 600 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
add_test(NAME fit_families COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fit_families.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_families)
set_tests_properties(fit_families PROPERTIES LABELS "mpi;em" TIMEOUT 900 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
# The CPU E-step's block kernels built for x86-64 (baseline), x86-64-v3 (AVX2,
# FMA) and x86-64-v4 (AVX-512) give the same bits (src/backend/cpu_block.h).
ghf_unit_test(NAME test_cpu_isa SOURCES tests/test_cpu_isa.c LABELS em TIMEOUT 120)
# The GPU each rank of a run uses (src/backend/devmap.h), without a GPU: the
# pure assignment, and the collective one on 1 and 4 ranks.
ghf_unit_test(NAME test_devmap SOURCES tests/test_devmap.c LABELS em TIMEOUT 60)
ghf_mpi_test(NAME test_devmap_np4 NP 4 COMMAND $<TARGET_FILE:test_devmap> LABELS em TIMEOUT 60)
# Standard errors (--se): ranks, the interpolated posterior, subset vs full,
# boundary fits, job files, bad values (tests/se.sh; the information itself
# is checked against a finite-difference Hessian in python/tests/test_se.py).
add_test(NAME fit_se COMMAND bash ${CMAKE_SOURCE_DIR}/tests/se.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_se)
set_tests_properties(fit_se PROPERTIES LABELS "mpi;em" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
# The factor form of the dispersion (--sigma diag|factor:R): ranks, every
# family, the schema, a sweep over sigma, eval/sample, --se, --missing em, bad
# input (tests/fit_factor.sh; that EM is at the maximum, the SEs against a
# finite-difference Hessian, the --missing em log-likelihood recomputed:
# python/tests/test_factor.py).
add_test(NAME fit_factor COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fit_factor.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/fit_factor)
set_tests_properties(fit_factor PROPERTIES LABELS "mpi;em" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
# Mixtures of one family (--components K; src/em/em_mixture.c, docs/math.md
# 10), tests/fit_mixture.py in four modes of a few seconds each: gauss (against
# scikit-learn's GaussianMixture, the schema, K = 1 bitwise, bad input),
# recovery (NIG/GH components: proportions, means, adjusted Rand index, a
# monotone trace, 1-4 ranks bitwise), sweep (components: [1, 2, 3, 4], the BIC
# picks 3), max (an independent scipy maximisation finds nothing higher).
# Debian's python3 (h5py, scipy, scikit-learn: scripts/install-deps.sh).
find_program(GHF_SYS_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT GHF_SYS_PYTHON3)
  set(GHF_SYS_PYTHON3 /usr/bin/python3)
endif()
foreach(mode gauss recovery sweep max)
  add_test(NAME fit_mixture_${mode} COMMAND ${GHF_SYS_PYTHON3} ${CMAKE_SOURCE_DIR}/tests/fit_mixture.py ${mode}
           $<TARGET_FILE:ghfit> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/work/fit_mixture_${mode})
  set_tests_properties(fit_mixture_${mode} PROPERTIES LABELS "mpi;em" TIMEOUT 300 PROCESSORS 2
                       ENVIRONMENT "${GHF_MPI_ENV}")
endforeach()
