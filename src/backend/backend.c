/* backend.c - choosing a backend and the GPUs, collectively. */
#include "backend.h"

#include <stdio.h>
#include <string.h>

#include "devmap.h"
#ifdef GHFIT_HAVE_CUDA
#include "cuda_opts.h"
#endif

/* this rank's GPU, from ghf_backend_map_devices */
static int g_plan_set = 0, g_plan_dev = 0;

int ghf__backend_device_plan(int *dev)
{
    if (g_plan_set) *dev = g_plan_dev;
    return g_plan_set;
}

void ghf_backend_map_devices(MPI_Comm world, MPI_Comm group, const char *which)
{
    int ngpu = 0;
#ifdef GHFIT_HAVE_CUDA
    if (strcmp(which, "cpu") != 0) ngpu = ghf_cuda_device_count();
#endif
    int dev = 0, shared = 0, wrank = 0, gmin = ngpu;
    char note[1024];
    MPI_Comm_rank(world, &wrank);
    MPI_Allreduce(&ngpu, &gmin, 1, MPI_INT, MPI_MIN, world);
    const int rc = ghf_devmap_collective(world, group, ngpu > 0 ? ngpu : 1, &dev, &shared, note, sizeof note);
    g_plan_set = rc == 0 && ngpu > 0;
    g_plan_dev = dev;
    if (wrank == 0 && rc == 0 && gmin > 0 && strcmp(which, "cpu") != 0)
        fprintf(stderr, "ghfit: note: --backend %s: GPUs for the groups: %s\n", which, note);
}

const char *ghf_backends_compiled(void)
{
#ifdef GHFIT_HAVE_CUDA
    return "cpu cuda";
#else
    return "cpu";
#endif
}

int ghf_backend_gpu_count(void)
{
#ifdef GHFIT_HAVE_CUDA
    return ghf_cuda_device_count();
#else
    return 0;
#endif
}

ghf_backend *ghf_backend_create(MPI_Comm comm, const char *which, const double *x, int64_t nrows,
                                int d, int *status, char *err, size_t errlen)
{
    return ghf_backend_create_f32(comm, which, x, NULL, NULL, nrows, d, status, err, errlen);
}

ghf_backend *ghf_backend_create_f32(MPI_Comm comm, const char *which, const double *x, const float *x32,
                                    const double *shift, int64_t nrows, int d, int *status, char *err,
                                    size_t errlen)
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
    if (all_have) {
        ghf_cuda_opts o;
        ghf_cuda_opts_default(&o);
        /* auto: ranks that must share a GPU reduce through the host (NCCL
         * refuses two ranks of one communicator on one device) */
        if (want_cuda == -1 && o.reduce == GHF_CUDA_REDUCE_NCCL && ghf_cuda_ranks_share_gpu(comm)) {
            static int noted = 0;
            int rank = 0;
            MPI_Comm_rank(comm, &rank);
            if (rank == 0 && !noted++)
                fprintf(stderr, "ghfit: note: ranks of this fit share a GPU (more ranks than GPUs on a node); "
                                "--backend auto reduces the statistics through the host (MPI)\n");
            o.reduce = GHF_CUDA_REDUCE_MPI;
        }
        if (x32) { /* float32 on the device */
            o.x32 = x32;
            o.shift = shift;
        }
        be = ghf_backend_cuda_create_opts(comm, x32 ? NULL : x, nrows, d, &o, err, errlen);
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
#else
    (void)x32;
    (void)shift;
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
