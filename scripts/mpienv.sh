# Source me: environment for running Open MPI as root on a small machine or
# in a container (see docs/user-guide.md).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_fbtl_posix_read_datasieving=0
export HDF5_USE_FILE_LOCKING=FALSE
