# io/ tests: the HDF5 reader/writers under MPI (1, 2, 3 ranks) and the
# serial result-file writer.
add_executable(test_io tests/test_io.c)
target_link_libraries(test_io PRIVATE ghfit_core PkgConfig::HDF5)
target_include_directories(test_io PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/io/internal)
foreach(np 1 2 3)
  ghf_mpi_test(NAME io_mpi_np${np} NP ${np} COMMAND $<TARGET_FILE:test_io> LABELS io TIMEOUT 120)
endforeach()
ghf_unit_test(NAME io_writer SOURCES tests/test_io_writer.c LABELS io TIMEOUT 60)
