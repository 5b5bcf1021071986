/* cuda_opts.h - internal options of the CUDA backend (tests,
 * benchmarks, and the environment overrides).  Not part of the public API:
 * the program uses ghf_backend_cuda_create() from backend.h, which reads the
 * defaults below, including the environment variables. */
#ifndef GHF_BACKEND_CUDA_OPTS_H
#define GHF_BACKEND_CUDA_OPTS_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "estep_cuda.h" /* GHF_CUDA_FUSED_DMAX */

typedef enum {
    GHF_CUDA_REDUCE_NCCL = 0, /* ncclAllReduce inside the graph (default) */
    GHF_CUDA_REDUCE_MPI = 1   /* GPU compute, stats to the host, MPI_Allreduce
                                 (several ranks on one GPU; env GHFIT_CUDA_REDUCE=mpi) */
} ghf_cuda_reduce;

typedef struct ghf_cuda_opts {
    ghf_cuda_reduce reduce;
    int graph;          /* 1: capture once, replay (default); 0: eager launches every call
                           (env GHFIT_CUDA_GRAPH=0) */
    int plan;           /* -1 auto (plan when nrows >= plan_min_rows), 0 never, 1 always
                           (env GHFIT_CUDA_PLAN=auto|0|1) */
    int64_t plan_min_rows; /* env GHFIT_CUDA_PLAN_MIN_ROWS, default 4096 */
    int zrange;         /* 0 exact: a pass over the rows for max q;
                           1 bound (default, as the CPU backend): no pass, qmax from
                           |L^-1|_F (R + |c - mu|); the plan's pieces sit on a fixed
                           grid, so both give the same values
                           (env GHFIT_CUDA_ZRANGE=exact|bound) */
    int fused_dmax;     /* fused kernel for d <= fused_dmax (<= GHF_CUDA_FUSED_DMAX);
                           0 forces the cuBLAS path (env GHFIT_CUDA_FUSED_DMAX) */
    int mma;            /* fused kernel: 1 s5/s6 on the FP64 tensor cores (sm_80 and newer),
                           0 per-thread register sums, -1 by d (default: tensor cores for
                           d >= 7) (env GHFIT_CUDA_MMA) */
    int wide;           /* GHF_CUDA_FUSED_DMAX < d <= GHF_CUDA_WIDE_DMAX on sm_80 and newer: 1 the
                           wide fused kernel (one pass over x, quadratic forms and s6 on the
                           FP64 tensor cores; kernels/estep_wide.cu), 0 the cuBLAS path.
                           Default 0 until the kernel has been run and measured on a GPU
                           (env GHFIT_CUDA_WIDE=1) */
    int minb;           /* register-sum kernel: resident blocks per SM its registers must
                           allow (2, 3, 4; 0 default by d: no spills) (env GHFIT_CUDA_MINB) */
    int64_t chunk_bytes; /* cuBLAS path: rows per chunk = chunk_bytes / (8 d)
                            (env GHFIT_CUDA_CHUNK_MB, default 256) */
    double timeout_s;   /* give up waiting for one E-step after this long (0: never;
                           env GHFIT_CUDA_TIMEOUT_S, default 600) */
    /* Data already on the device, column-major (x_dev[j*nrows + i]); the
     * backend takes ownership (cudaFree on destroy).  x must then be NULL. */
    double *x_dev;
    /* The same as float32 (fused or wide path only): kept
     * float32 on the device, each load widened to double and centred by
     * shift; owned as x_dev.  x must then be NULL. */
    float *x32_dev;
    /* A float32 shard on the host (nrows*d, row-major) instead of x: the
     * backend's rows are (double)x32 - shift[j] (shift: d doubles, NULL for
     * zeros), which is what the host's centring of the widened shard gives,
     * bit for bit.  Kept float32 on the device on the fused and wide paths; the cuBLAS
     * path widens it once, on the device, into its float64 copy. */
    const float *x32;
    const double *shift;
} ghf_cuda_opts;

/* Defaults, then the environment overrides. */
void ghf_cuda_opts_default(ghf_cuda_opts *o);

/* As ghf_backend_cuda_create, with explicit options.  Collective over comm:
 * returns NULL on every rank (message in err) if any rank fails. */
ghf_backend *ghf_backend_cuda_create_opts(MPI_Comm comm, const double *x, int64_t nrows, int d,
                                          const ghf_cuda_opts *o, char *err, size_t errlen);

/* Diagnostics of a CUDA backend (NULL-safe; zeros for another backend). */
typedef struct ghf_cuda_info {
    int device;        /* CUDA device ordinal used */
    int fused;         /* 1: fused kernel path (d <= GHF_CUDA_FUSED_DMAX) */
    int wide;          /* 1: wide fused kernel path; fused = wide = 0: cuBLAS path */
    int f32;           /* 1: the shard is float32 on the device */
    int mma;           /* fused path: 1 tensor-core sums, 0 register sums */
    int graph;         /* graph mode */
    int reduce;        /* ghf_cuda_reduce */
    int graph_nodes;   /* nodes in the captured graph (0 before capture) */
    int grid;          /* blocks of the row kernels */
    double t_launch;   /* seconds of host time in launch + wait, summed */
    double t_graph_ms_last; /* device time of the last call (first to last event), ms */
} ghf_cuda_info;
void ghf_cuda_get_info(const ghf_backend *be, ghf_cuda_info *info);

/* Allocate n*d doubles on the device of this rank (selected as the backend
 * would) and fill them with synthetic data (ghf__cu_generate); for
 * benchmarks that need more data than the host should hold.  NULL on error. */
double *ghf_cuda_generate_device(MPI_Comm comm, int64_t n, int d, uint64_t seed, char *err,
                                 size_t errlen);
/* The same data rounded to float32 (for x32_dev). */
float *ghf_cuda_generate_device_f32(MPI_Comm comm, int64_t n, int d, uint64_t seed, char *err,
                                    size_t errlen);

#endif /* GHF_BACKEND_CUDA_OPTS_H */
