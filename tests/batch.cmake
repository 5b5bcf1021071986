# Batch operations: job files and sweeps (ghfit run), ghfit summary,
# checkpoint/restart and preemption, Slurm scripts (label slurm).
ghf_unit_test(NAME test_job SOURCES tests/test_job.c LABELS batch TIMEOUT 60)
add_test(NAME batch_sweep COMMAND bash ${CMAKE_SOURCE_DIR}/tests/batch_sweep.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/batch_sweep)
set_tests_properties(batch_sweep PROPERTIES LABELS "mpi;batch" TIMEOUT 600 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
add_test(NAME batch_ckpt COMMAND bash ${CMAKE_SOURCE_DIR}/tests/batch_ckpt.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/batch_ckpt)
set_tests_properties(batch_ckpt PROPERTIES LABELS "mpi;batch" TIMEOUT 600 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
# A real one-node Slurm (root; GHFIT_WITH_SLURM=1 scripts/install-deps.sh): the
# sbatch scripts with the users' resource options, a job array, cancel,
# requeue by Slurm, the time limit (requeue and resume; no loop with a short
# --time), resubmission, typos, the README example and the installed script.
# Skipped (exit 77) when Slurm/munge are not installed.
add_test(NAME batch_slurm COMMAND bash ${CMAKE_SOURCE_DIR}/tests/batch_slurm.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/batch_slurm ${CMAKE_BINARY_DIR})
set_tests_properties(batch_slurm PROPERTIES LABELS "slurm;batch" TIMEOUT 500 PROCESSORS 2
  SKIP_RETURN_CODE 77 RUN_SERIAL TRUE ENVIRONMENT "${GHF_MPI_ENV}")
# ghfit.sbatch with eval and gof (no checkpoint) on the same one-node Slurm:
# results equal mpirun's, a typo fails in the check step, the time-limit
# warning is a note, scancel leaves nothing, a requeued job runs afresh
# (tests/batch_slurm_post.sh).
add_test(NAME batch_slurm_post COMMAND bash ${CMAKE_SOURCE_DIR}/tests/batch_slurm_post.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/batch_slurm_post)
set_tests_properties(batch_slurm_post PROPERTIES LABELS "slurm;batch" TIMEOUT 200 PROCESSORS 2
  SKIP_RETURN_CODE 77 RUN_SERIAL TRUE ENVIRONMENT "${GHF_MPI_ENV}")
# Signals 0, 0.2, 1 and 3 s after a ghfit.sbatch job starts (scancel, the
# time-limit warning, scancel --signal=USR1), ranks slow to load: the documented
# outcome, one note, nothing left, resubmissions complete
# (tests/batch_slurm_early.sh; about 50 s).
add_test(NAME batch_slurm_early COMMAND bash ${CMAKE_SOURCE_DIR}/tests/batch_slurm_early.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/batch_slurm_early)
set_tests_properties(batch_slurm_early PROPERTIES LABELS "slurm;batch" TIMEOUT 300 PROCESSORS 2
  SKIP_RETURN_CODE 77 RUN_SERIAL TRUE ENVIRONMENT "${GHF_MPI_ENV}")
# cmake --install to a fresh prefix, module load of the generated modulefile,
# the README's usage lines with a bare ghfit (skipped without a module system).
add_test(NAME install_module COMMAND bash ${CMAKE_SOURCE_DIR}/tests/install_module.sh ${CMAKE_BINARY_DIR}
         ${CMAKE_BINARY_DIR}/work/install_module)
set_tests_properties(install_module PROPERTIES LABELS "install;mpi" TIMEOUT 300 PROCESSORS 2
  SKIP_RETURN_CODE 77 ENVIRONMENT "${GHF_MPI_ENV}")
# Arrays: `--slice K/4` over a warm-started rolling-window sweep == one run with
# 4 groups (bitwise); slice, job_hash, n_fits_total in the result files;
# `ghfit summary` warns about missing slices (tests/batch_array.sh).
add_test(NAME batch_array COMMAND bash ${CMAKE_SOURCE_DIR}/tests/batch_array.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/batch_array)
set_tests_properties(batch_array PROPERTIES LABELS "mpi;batch" TIMEOUT 600 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
