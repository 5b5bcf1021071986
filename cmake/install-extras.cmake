# install-extras.cmake - runs at `cmake --install` time, when the prefix is
# known: installs the Slurm scripts with the installed binary's path written
# in, and a modulefile (Environment Modules / Lmod) for the prefix.
# Set by the install(CODE) in CMakeLists.txt: GHFIT_SRC, GHFIT_BUILD,
# GHFIT_VERSION, GHFIT_BINDIR, GHFIT_DATADIR, GHFIT_DOCDIR.
set(GHFIT_PREFIX "${CMAKE_INSTALL_PREFIX}")
string(MD5 prefix_id "${GHFIT_PREFIX}")   # one staging folder per prefix: installs may run side by side
set(stage "${GHFIT_BUILD}/install-stage/${prefix_id}")
file(MAKE_DIRECTORY "${stage}")
foreach(s ghfit.sbatch ghfit-array.sbatch)
  file(READ "${GHFIT_SRC}/slurm/${s}" text)
  string(REPLACE "installed_bin=\"\"" "installed_bin=\"${GHFIT_PREFIX}/${GHFIT_BINDIR}/ghfit\"" text "${text}")
  file(WRITE "${stage}/${s}" "${text}")
endforeach()
file(INSTALL DESTINATION "${GHFIT_PREFIX}/${GHFIT_DATADIR}/ghfit/slurm" TYPE PROGRAM
     FILES "${stage}/ghfit.sbatch" "${stage}/ghfit-array.sbatch")
configure_file("${GHFIT_SRC}/cmake/ghfit.modulefile.in" "${stage}/${GHFIT_VERSION}" @ONLY)
file(INSTALL DESTINATION "${GHFIT_PREFIX}/${GHFIT_DATADIR}/modulefiles/ghfit" TYPE FILE
     FILES "${stage}/${GHFIT_VERSION}")
