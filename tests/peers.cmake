# Peer benchmark smoke test (label: bench): bench/peers/run.sh --smoke on a
# tiny data set (N=2000, d=3, GH and NIG, 3 iterations), then a check that
# the table has times and log-likelihoods for both ghfit and normix.
# run.sh makes (or reuses, keyed by the hash of bench/peers/requirements.txt)
# <repo>/.venv-bench from PyPI; without Python >= 3.12 or without network it
# exits non-zero with a message, so this test fails loudly instead of passing;
# only a missing Python >= 3.12 (Debian 12 ships 3.11) is reported as a skip.
find_program(GHF_BASH bash REQUIRED)
find_program(GHF_PYTHON3 python3)
if(NOT GHF_PYTHON3)
  set(GHF_PYTHON3 python3)
endif()
set(GHF_PEERS_OUT ${CMAKE_BINARY_DIR}/peers-smoke)
add_test(NAME peers_smoke
  COMMAND ${GHF_BASH} -c
    "rm -f '${GHF_PEERS_OUT}/table.md'; GHF_PEERS_SKIP_NO_PYTHON=1 '${GHF_BASH}' '${CMAKE_SOURCE_DIR}/bench/peers/run.sh' --smoke --out '${GHF_PEERS_OUT}'; rc=$?; [ $rc -eq 0 ] || exit $rc; '${GHF_PYTHON3}' '${CMAKE_SOURCE_DIR}/bench/peers/check_table.py' '${GHF_PEERS_OUT}/table.md' 2")
set_tests_properties(peers_smoke PROPERTIES LABELS "bench" TIMEOUT 900 PROCESSORS 2 SKIP_RETURN_CODE 77
  ENVIRONMENT "${GHF_MPI_ENV};GHFIT=$<TARGET_FILE:ghfit>")
