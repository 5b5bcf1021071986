/* backend.h - the E-step backends (CPU: OpenMP + OpenBLAS + MPI_Allreduce;
 * CUDA: fused kernels + NCCL, replayed as a CUDA graph).
 *
 * A backend owns one rank's shard for the whole fit (shapes never change),
 * and turns the parameters of one EM iteration into the globally summed
 * statistics (layout in kernels/estep.h).  estep() is collective over the
 * communicator the backend was created with. */
#ifndef GHF_BACKEND_H
#define GHF_BACKEND_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "estep.h"

typedef struct ghf_estep_input {
    int d;
    const double *mu;   /* [d] location */
    const double *linv; /* [d*d] row-major, lower-triangular L^-1 (Sigma = L L^T) */
    const double *w;    /* [d] L^-1 gamma */
    ghf_estep_consts c; /* order, posterior a, prior b, log-density constant */
    int stop_request;   /* this rank's stop request, summed into stats[GHF_ST_STOP] */
} ghf_estep_input;

typedef struct ghf_backend ghf_backend;
struct ghf_backend {
    const char *name; /* "cpu" or "cuda" */
    /* Collective.  stats[ghf_stats_len(d)] receives the sums over all ranks.
     * Returns 0, or 1 on a run-time failure (message in err). */
    int (*estep)(ghf_backend *be, const ghf_estep_input *in, double *stats, char *err, size_t errlen);
    void (*destroy)(ghf_backend *be);
    /* Seconds spent so far, as measured by the backend (GPU: with events). */
    double t_estep, t_allreduce;
    int64_t n_calls;
    /* Bessel evaluation strategy used in the last call (diagnostic): 0 direct, 1 plan */
    int last_used_plan;
    /* What runs the E-step, the same on every rank: "cpu", or "cuda:" and the
     * CUDA device of each rank of the communicator in rank order ("cuda:0,1");
     * recorded in the result file (attribute `device` of each fit). */
    char device[96];
    /* Observation weights (weighted EM): NULL, or one non-negative weight per
     * row of the shard (every per-row contribution to the statistics, the
     * count included, is multiplied by its weight; a row of weight 0 adds
     * nothing, even where its moments are not finite).  Set on every rank or
     * none.  The CPU backend reads them at every estep(); the CUDA backend
     * copies them to the device at its first estep() with weights (the array
     * must not change afterwards); setting NULL for one call (the unweighted
     * log-likelihood) works on both. */
    const double *weights;
    void *impl;
};

/* x: nrows*d row-major doubles (the rank's shard; may be NULL if nrows == 0).
 * The backend keeps a pointer to x (CPU) or copies it (CUDA); x must outlive the backend. */
ghf_backend *ghf_backend_cpu_create(MPI_Comm comm, const double *x, int64_t nrows, int d,
                                    char *err, size_t errlen);

/* `ghfit eval` (collective): the per-row values of the E-step's arithmetic
 * without its statistics, in two passes over sub-blocks of GHF_SCORE_BLOCK
 * rows.  The first leaves q[i] = |L^-1 (x_i - mu)|^2 for each of the rank's
 * rows (and, with zw, nrows doubles of scratch, (L^-1 (x_i - mu)).w in
 * zw[i]); a row holding a non-finite value gets flag[i] = 1 (flag is not
 * otherwise written) and the values of x_i = mu.  The second calls fn (not
 * NULL) for every sub-block, in the thread that computed it: with zw, the rows' log
 * f(x_i), E[Y|x_i], E[1/Y|x_i] (the Bessel plan built for a global range,
 * so that every row's values depend on its row only: for 3 <= d <=
 * GHF_SCORE_ONE_PASS_MAX_D and row0, the rank's first row in the data set,
 * a multiple of GHF_SCORE_BLOCK on every rank, the range of
 * ghf_backend_cpu_score1, so that both give the same values; else the
 * largest q over all ranks) in
 * the block's ll, ey, einvy (the thread's scratch, valid during the call;
 * rows with a non-finite result keep what the arithmetic gave); without
 * zw, the quadratic forms only (ll, ey, einvy NULL; nothing collective).
 * Every rank passes zw or none.  fn is called only once x has been read
 * for the last time (the caller may put what it keeps in x's memory) and
 * may change q and flag of its block.  Returns 0, or 1 (message in err). */
#define GHF_SCORE_BLOCK 256
typedef struct ghf_score_block {
    int64_t bi, r0;       /* sub-block bi: rows r0 = bi GHF_SCORE_BLOCK .. r0 + nb - 1 */
    int nb;               /* GHF_SCORE_BLOCK but for the last */
    double *q;            /* q + r0 */
    double *ll, *ey, *einvy; /* [nb] scratch, or NULL */
    unsigned char *flag;  /* flag + r0 */
} ghf_score_block;
typedef void (*ghf_score_fn)(void *ctx, const ghf_score_block *b);
int ghf_backend_cpu_score(ghf_backend *be, const ghf_estep_input *in, int64_t row0, double *q, double *zw,
                          unsigned char *flag, ghf_score_fn fn, void *ctx, char *err, size_t errlen);
/* `ghfit eval` in one pass (collective; as ghf_backend_cpu_score with zw):
 * sub-block by sub-block, q, zw, flags, the moments and fn while the
 * block is in cache; q, ll, ey, einvy of the block are the thread's
 * scratch, but with in_rows (d >= 3) ll, ey, einvy of a block of a multiple
 * of 8 rows lie in its own rows' memory: x + r0 d, + nb, + 2 nb (the
 * backend writes them there: the caller gives up x).  fn is called once the block's own rows (x + r0 d, nb d doubles)
 * have been read for the last time: it may overwrite them, and no other
 * rows.  The Bessel plan covers q up to GHF_SCORE_MARGIN times the largest
 * q of the sampled sub-blocks (those whose global index, row0 /
 * GHF_SCORE_BLOCK + local index, is a multiple of GHF_SCORE_SAMPLE) over
 * all ranks; rows above it are evaluated directly.  row0: the rank's
 * first row in the data set, a multiple of GHF_SCORE_BLOCK, so that every
 * rank count samples the same rows and builds the same plan.  Returns 0,
 * or 1 (message in err). */
#define GHF_SCORE_SAMPLE 256
#define GHF_SCORE_ONE_PASS_MAX_D 32 /* eval takes the one pass up to this d (above: no faster) */
#define GHF_SCORE_MARGIN 16.0
int ghf_backend_cpu_score1(ghf_backend *be, const ghf_estep_input *in, int64_t row0, int in_rows,
                           unsigned char *flag, ghf_score_fn fn, void *ctx, char *err, size_t errlen);
/* dst[0..n) = src[0..n), with non-temporal stores where dst is 16-byte
 * aligned (for results read back only after a pass over many rows: no
 * read-for-ownership of their cache lines).  A thread's streamed stores are
 * ordered before what follows by ghf__stream_fence(), which
 * ghf_backend_cpu_score calls in every thread at the end of each pass (fn's
 * copies included). */
void ghf__stream_copy(double *dst, const double *src, int n);
void ghf__stream_fence(void);

/* Tests: plain loops for d <= small_d_max (else BLAS; at most 32), and the
 * Bessel plan: -1 auto (when the shard pays for it), 0 never, 1 always. */
void ghf_backend_cpu_tune(ghf_backend *be, int small_d_max, int plan_mode);
/* Tests and benchmarks: the per-row moments by the scalar reference path
 * (ref = 1: ghf_estep_point, one log and two exps per row) or by the folded
 * plan over arrays of rows (ref = 0, the default; src/backend/cpu_block.h). */
void ghf_backend_cpu_tune_path(ghf_backend *be, int ref);

#ifdef GHFIT_HAVE_CUDA
/* Number of usable CUDA devices on this rank; 0 on any error (no driver, no device). */
int ghf_cuda_device_count(void);
/* 1 if some ranks of a node would have to share a GPU (NCCL refuses that), or
 * a node has more ranks than GPUs.  Collective over comm. */
int ghf_cuda_ranks_share_gpu(MPI_Comm comm);
ghf_backend *ghf_backend_cuda_create(MPI_Comm comm, const double *x, int64_t nrows, int d,
                                     char *err, size_t errlen);
#endif

/* Collective over world, once, after world is split into groups that fit on
 * their own communicators (group; every rank in exactly one): chooses each
 * rank's GPU from the world's node-local layout (src/backend/devmap.h: a
 * group's ranks on distinct GPUs, groups spread over all GPUs of a node) for
 * the CUDA backends created later on group, and, when which is "auto" or
 * "cuda" and the ranks have GPUs, says on world rank 0 what it chose.
 * Without this call a CUDA backend assigns the GPUs of its own
 * communicator's ranks the same way. */
void ghf_backend_map_devices(MPI_Comm world, MPI_Comm group, const char *which);
/* The device chosen by ghf_backend_map_devices for this rank: 1 and *dev, or 0 if none was. */
int ghf__backend_device_plan(int *dev);

/* Choose and create a backend: which = "auto", "cpu" or "cuda".  Collective:
 * all ranks agree (auto picks cuda only when every rank has a GPU; where
 * ranks of comm must share a GPU, auto reduces the statistics through the
 * host instead of NCCL, which refuses that, and says so).
 * Returns NULL with a message (status 2 for a bad choice, 1 otherwise) in *status. */
ghf_backend *ghf_backend_create(MPI_Comm comm, const char *which, const double *x, int64_t nrows,
                                int d, int *status, char *err, size_t errlen);

/* The same, for a shard read as float32 (x32, row-major, nrows*d) and
 * centred on the host into x (x = (double)x32 - shift[j], the exact double
 * subtraction): a CUDA backend keeps x32 (float32 on the device, half the
 * bytes per iteration) and widens and centres it in registers, the same
 * doubles as x; a CPU backend uses x.  x32 is only read during creation.
 * x32 NULL: ghf_backend_create. */
ghf_backend *ghf_backend_create_f32(MPI_Comm comm, const char *which, const double *x, const float *x32,
                                    const double *shift, int64_t nrows, int d, int *status, char *err,
                                    size_t errlen);

/* Usable CUDA devices on this rank (0 without the CUDA backend). */
int ghf_backend_gpu_count(void);

/* Backends compiled into this binary, e.g. "cpu cuda". */
const char *ghf_backends_compiled(void);

#endif
