# I/O faults (issue 16), one test per class: path safety, bounded input steps,
# messages that name the cause, full disk (a small tmpfs; skipped where it
# cannot be mounted), `ghfit generate`.  tests/faults_io.sh, h5py variants
# from tests/faults_make_h5.py.
foreach(class paths blocking messages disk generate)
  add_test(NAME faults_io_${class} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults_io.sh ${class}
           $<TARGET_FILE:ghfit> $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/faults_io_${class})
  set_tests_properties(faults_io_${class} PROPERTIES LABELS "cli;io;faults" TIMEOUT 600 PROCESSORS 2
    SKIP_RETURN_CODE 77 ENVIRONMENT "${GHF_MPI_ENV}")
endforeach()
