/* backend.c - choosing a backend, collectively. */
#include "backend.h"

#include <stdio.h>
#include <string.h>

const char *ghf_backends_compiled(void)
{
#ifdef GHFIT_HAVE_CUDA
    return "cpu cuda";
#else
    return "cpu";
#endif
}

ghf_backend *ghf_backend_create(MPI_Comm comm, const char *which, const double *x, int64_t nrows,
                                int d, int *status, char *err, size_t errlen)
{
    *status = 0;
    int want_cuda;
    if (strcmp(which, "cpu") == 0) {
        want_cuda = 0;
    } else if (strcmp(which, "cuda") == 0) {
        want_cuda = 1;
    } else if (strcmp(which, "auto") == 0) {
        want_cuda = -1;
    } else {
        snprintf(err, errlen, "--backend: unknown backend '%s' (expected auto, cpu or cuda)", which);
        *status = 2;
        return NULL;
    }
    int have = 0;
#ifdef GHFIT_HAVE_CUDA
    if (want_cuda != 0) have = ghf_cuda_device_count() > 0;
#endif
    /* every rank must agree: cuda only if every rank has a GPU */
    int all_have = have;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, comm);
    if (want_cuda == 1 && !all_have) {
#ifdef GHFIT_HAVE_CUDA
        snprintf(err, errlen, "--backend cuda: not every rank has a usable CUDA device");
#else
        snprintf(err, errlen, "--backend cuda: this ghfit was built without CUDA (backends: %s)",
                 ghf_backends_compiled());
#endif
        *status = 2;
        return NULL;
    }
    ghf_backend *be = NULL;
    int ok;
#ifdef GHFIT_HAVE_CUDA
    /* auto: a GPU of its own for every rank, or the CPU */
    if (want_cuda == -1 && all_have && ghf_cuda_ranks_share_gpu(comm)) {
        int rank = 0;
        MPI_Comm_rank(comm, &rank);
        if (rank == 0)
            fprintf(stderr, "ghfit: note: ranks would share a GPU (more ranks than GPUs on a node); "
                            "--backend auto uses the CPU\n");
        all_have = 0;
    }
    if (all_have) {
        be = ghf_backend_cuda_create(comm, x, nrows, d, err, errlen);
        ok = be != NULL;
        int all_ok = ok;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
        if (!all_ok) {
            if (be) be->destroy(be);
            if (ok) snprintf(err, errlen, "the CUDA backend failed to start on another rank");
            *status = 1;
            return NULL;
        }
        return be;
    }
#endif
    be = ghf_backend_cpu_create(comm, x, nrows, d, err, errlen);
    ok = be != NULL;
    int all_ok = ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        if (be) be->destroy(be);
        if (ok) snprintf(err, errlen, "the CPU backend failed to start on another rank");
        *status = 1;
        return NULL;
    }
    return be;
}
