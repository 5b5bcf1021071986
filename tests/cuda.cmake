# CUDA backend tests (registered only when the CUDA backend is compiled).
#   test_cuda_nodev      runs everywhere: without a GPU the CUDA build must fail
#                        cleanly and fall back to the CPU (skips, 77, on a GPU machine)
#   test_cuda_estep      GPU (label gpu): CUDA vs CPU backend, graph vs eager,
#                        NCCL single-rank communicator; skips (77) without a GPU
#   test_cuda_estep_np2  GPU, 2 ranks on one GPU: GPU compute + MPI reduction
if(GHFIT_HAVE_CUDA)
  ghf_unit_test(NAME test_cuda_nodev SOURCES tests/test_cuda_nodev.c LABELS cuda TIMEOUT 60)
  set_tests_properties(test_cuda_nodev PROPERTIES SKIP_RETURN_CODE 77)
  ghf_mpi_test(NAME test_cuda_nodev_np2 NP 2 COMMAND $<TARGET_FILE:test_cuda_nodev>
               LABELS cuda TIMEOUT 60)
  set_tests_properties(test_cuda_nodev_np2 PROPERTIES SKIP_RETURN_CODE 77)

  ghf_unit_test(NAME test_cuda_estep SOURCES tests/test_cuda_estep.c LABELS gpu TIMEOUT 300)
  set_tests_properties(test_cuda_estep PROPERTIES SKIP_RETURN_CODE 77)
  ghf_mpi_test(NAME test_cuda_estep_np2 NP 2 COMMAND $<TARGET_FILE:test_cuda_estep>
               LABELS gpu TIMEOUT 300)
  set_tests_properties(test_cuda_estep_np2 PROPERTIES SKIP_RETURN_CODE 77)

  # full fits, CPU vs CUDA backend: log-likelihood to 1e-10, same iterations
  add_test(NAME cuda_fit COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda_fit.sh $<TARGET_FILE:ghfit>
           $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/cuda_fit)
  set_tests_properties(cuda_fit PROPERTIES LABELS "gpu" TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "${GHF_MPI_ENV}")
  # sweeps with --backend auto on 1, 2, 4 ranks: GPUs per group, devices recorded
  add_test(NAME cuda_sweep COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda_sweep.sh $<TARGET_FILE:ghfit>
           $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/cuda_sweep)
  set_tests_properties(cuda_sweep PROPERTIES LABELS "gpu" TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "${GHF_MPI_ENV}")
  # weights, --missing em and float32 storage on the GPU against the CPU / float64 fits
  add_test(NAME cuda_wmf COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda_wmf.sh $<TARGET_FILE:ghfit>
           $<TARGET_FILE:h5get> ${CMAKE_BINARY_DIR}/work/cuda_wmf)
  set_tests_properties(cuda_wmf PROPERTIES LABELS "gpu" TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "${GHF_MPI_ENV}")
else()
  # a CPU-only build registers no GPU test (on a GPU node they would fail, not skip):
  # ctest -N -L gpu in this build lists none
  add_test(NAME cuda_tests_gated COMMAND ${CMAKE_CTEST_COMMAND} -N -L "^gpu$"
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(cuda_tests_gated PROPERTIES LABELS "unit" TIMEOUT 60
    PASS_REGULAR_EXPRESSION "Total Tests: 0")
endif()
