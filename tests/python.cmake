# The Python package (python/: reader, fitted law, ghfit-report), label python.
#   python_env      makes build/pyenv and pip installs ./python[test] (PyPI;
#                   the fixture the other two need)
#   python_pytest   pytest on real result files made with this ghfit
#   python_browser  the reports in Debian's headless chromium via Selenium;
#                   skipped (77) only when chromium cannot start at all
find_program(GHF_BASH bash REQUIRED)
find_program(GHF_PYTHON3 python3)
if(NOT GHF_PYTHON3)
  set(GHF_PYTHON3 python3)
endif()
set(GHF_PY_SH ${CMAKE_SOURCE_DIR}/tests/python.sh)
add_test(NAME python_env COMMAND ${GHF_BASH} ${GHF_PY_SH} env ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(python_env PROPERTIES LABELS python TIMEOUT 900 FIXTURES_SETUP ghf_pyenv
  ENVIRONMENT "GHF_PYTHON3=${GHF_PYTHON3}")
add_test(NAME python_pytest COMMAND ${GHF_BASH} ${GHF_PY_SH} unit ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
         $<TARGET_FILE:ghfit>)
set_tests_properties(python_pytest PROPERTIES LABELS python TIMEOUT 900 FIXTURES_REQUIRED ghf_pyenv
  ENVIRONMENT "${GHF_MPI_ENV}")
add_test(NAME python_browser COMMAND ${GHF_BASH} ${GHF_PY_SH} browser ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
         $<TARGET_FILE:ghfit>)
set_tests_properties(python_browser PROPERTIES LABELS python TIMEOUT 900 FIXTURES_REQUIRED ghf_pyenv
  SKIP_RETURN_CODE 77 ENVIRONMENT "${GHF_MPI_ENV}")
