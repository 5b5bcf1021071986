# Shared helpers for test fragments.
#
#   ghf_unit_test(NAME name SOURCES a.c [LABELS l ...] [ARGS ...])
#       builds tests/<sources> against ghfit_core and registers it.
#   ghf_mpi_test(NAME name NP n COMMAND cmd args... [LABELS ...] [TIMEOUT s])
#       runs cmd under mpirun with n ranks (root- and oversubscribe-safe).
# OMPI_MCA_pml=ob1: ob1 is the PML Open MPI selects here anyway (no
# high-speed network), but before selecting it Debian's Open MPI 4.1 opens
# the cm PML and its psm/psm2 MTLs, which costs ~0.2 s per rank; the MPI
# calls and ghfit's code paths are the same.  scripts/test.sh exports it too.
# Not OMPI_MCA_ess_singleton_isolated=1: isolated singletons all share one
# session directory (/tmp/ompi.HOST.UID/jf.0/1), and one that finalizes
# removes it under the others, so concurrent tests failed in MPI_Init
# ("orte_session_dir failed") or in MPI_File_open (sharedfp/sm "unable to
# open file for mmap").
set(GHF_MPI_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  OMPI_MCA_fbtl_posix_read_datasieving=0 OMP_NUM_THREADS=1 HDF5_USE_FILE_LOCKING=FALSE
  OMPI_MCA_pml=ob1)

function(ghf_unit_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LABELS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ghfit_core PkgConfig::HDF5) # tests may read files directly
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "unit;${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "${GHF_MPI_ENV};GHF_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()

function(ghf_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_test(NAME ${T_NAME} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP}
    --oversubscribe --timeout ${T_TIMEOUT} ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "mpi;${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    PROCESSORS ${T_NP}
    ENVIRONMENT "${GHF_MPI_ENV};GHF_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()
