# Fault tests (issue 16): each class asserts the exact outcome - exit status,
# one "ghfit: error:" (or "ghfit: note:") line, inputs unchanged, nothing left
# behind, no hang (time limits inside the scripts), no death on a signal.
foreach(t signals jobfile ckpt sweep deadrank)
  add_test(NAME faults_${t} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults_${t}.sh $<TARGET_FILE:ghfit>
           $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/faults_${t})
  set_tests_properties(faults_${t} PROPERTIES LABELS "mpi;faults" TIMEOUT 600 PROCESSORS 2
    ENVIRONMENT "${GHF_MPI_ENV}")
endforeach()
# A full disk under the checkpoints: a 512 KiB tmpfs (root); skipped (77) where
# none can be mounted.
add_test(NAME faults_ckpt_diskfull COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults_ckpt_diskfull.sh
         $<TARGET_FILE:ghfit> $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/faults_ckpt_diskfull)
set_tests_properties(faults_ckpt_diskfull PROPERTIES LABELS "mpi;faults" TIMEOUT 600 PROCESSORS 2
  SKIP_RETURN_CODE 77 ENVIRONMENT "${GHF_MPI_ENV}")
# Collective discipline (src/dist/agree.h): one rank fails at each start-up
# step; on 2 and 3 ranks; label sanitize: run in the sanitizer build too.
foreach(np 2 3)
  add_test(NAME faults_collective_np${np} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults_collective.sh
           $<TARGET_FILE:ghfit> ${CMAKE_BINARY_DIR}/work/faults_collective_np${np} ${np})
  set_tests_properties(faults_collective_np${np} PROPERTIES LABELS "mpi;faults;sanitize" TIMEOUT 900
    PROCESSORS 2 ENVIRONMENT "${GHF_MPI_ENV}")
endforeach()
# Issue 25 item 5: the fitted-law commands and the fit options under hostile
# input on 1-3 ranks (a table of refusals), each command replacing only its
# own kind of file, too few effective rows, weighted fits in summary --lrt,
# checkpoints of changed data or weights or an out-of-range dimension, and
# two allocation failures before collectives (tests/adversarial.sh).
add_test(NAME faults_adversarial COMMAND bash ${CMAKE_SOURCE_DIR}/tests/adversarial.sh $<TARGET_FILE:ghfit>
         ${CMAKE_BINARY_DIR}/work/faults_adversarial)
set_tests_properties(faults_adversarial PROPERTIES LABELS "cli;mpi;faults" TIMEOUT 600 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
# The writers under signals (issue 25): SIGINT/TERM/USR1/HUP while eval, sample,
# risk and gof write (nothing left, the signal's exit status); SIGKILL while
# each writer writes, then the same command again removes the dead writer's
# temporary file when it takes over the stale lock (tests/faults_writers.sh).
add_test(NAME faults_writers COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults_writers.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/faults_writers)
set_tests_properties(faults_writers PROPERTIES LABELS "faults" TIMEOUT 300 ENVIRONMENT "${GHF_MPI_ENV}")
# A stop signal while the ranks still load (before main; GHFIT_TEST_LOAD_SLEEP):
# through ghfit-launch it is handled (75, a checkpoint), without it the ranks end
# by the signal, nothing written (tests/faults_launch.sh, 2 ranks).
add_test(NAME faults_launch COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults_launch.sh $<TARGET_FILE:ghfit>
         $<TARGET_FILE:ghfit-launch> $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/faults_launch)
set_tests_properties(faults_launch PROPERTIES LABELS "mpi;faults" TIMEOUT 300 PROCESSORS 2
  ENVIRONMENT "${GHF_MPI_ENV}")
