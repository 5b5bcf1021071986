/* cuda.c - the CUDA E-step backend: device binding, the shard on the
 * device, one CUDA graph per fit (parameters in, kernels, cuBLAS for large d,
 * ncclAllReduce, statistics out), and the NCCL / MPI reductions.
 *
 * Per call the host writes the iteration's parameters into pinned staging
 * memory, launches the graph (the first call runs the same work eagerly as a
 * warm-up for NCCL and cuBLAS, then captures it), and waits by polling
 * cudaStreamQuery and ncclCommGetAsyncError; nothing else crosses the bus.
 *
 * Observation weights (be->weights) are copied to the device once, at the
 * first weighted call, with their sums (sum w, sum w x); the graph is
 * captured in the weighting of its first call, and a call in the other
 * weighting (ghf_em_loglik_unweighted's one unweighted pass) runs the same
 * work eagerly.  A float32 shard (opts x32) stays float32 on the device on
 * the fused and wide paths (widened in registers); the cuBLAS path widens it
 * once at upload.  Paths by d: fused (d <= GHF_CUDA_FUSED_DMAX), wide
 * (opt-in, up to GHF_CUDA_WIDE_DMAX, kernels/estep_wide.cu), cuBLAS.
 * Design notes: docs/design-cuda.md. */
#ifdef GHFIT_HAVE_CUDA

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#ifdef GHFIT_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#define GHF_NVTX_PUSH(s) nvtxRangePushA(s)
#define GHF_NVTX_POP() nvtxRangePop()
#else
#define GHF_NVTX_PUSH(s) ((void)0)
#define GHF_NVTX_POP() ((void)0)
#endif

#include "backend.h"
#include "devmap.h"
#include "cuda_opts.h"
#include "estep_cuda.h"

typedef struct cuda_impl {
    MPI_Comm comm;
    int rank, size, dev, sm_count;
    int64_t n;
    int d, len, nent;
    ghf_cuda_opts o;
    int fused, use_plan;
    int wide;    /* the wide fused kernel (GHF_CUDA_FUSED_DMAX < d <= GHF_CUDA_WIDE_DMAX) */
    int onepass; /* fused or wide: one kernel reads the shard (float32 stays float32) */
    int64_t chunk;
    int grid;
    cudaStream_t s;
    cudaEvent_t ev[3];
    cublasHandle_t blas;
    void *blas_ws;
    ncclComm_t nccl;
    int failed;
    int capturing; /* enqueue() runs under stream capture */
    /* device; the shard is x (float64), or x32 (float32, fused path only) */
    float *x32;
    double *shift;  /* [d] the host's centring of a float32 shard (zeros otherwise) */
    double *w, *s4w; /* weighted EM: the rows' weights, and [d + 1] sum w x, sum w */
    const double *w_src; /* the host weights copied to w (first weighted call) */
    int wtd;         /* this call is weighted */
    int graph_wtd;   /* the weighting the graph was captured in */
    double *x, *pb, *stats, *part, *qpart, *s4, *bound, *q, *zw, *u, *zbuf, *consts;
    double *s6part; /* cuBLAS path: per-batch d x d partial products of s6 */
    int64_t kb;     /* rows per batch of the s6 product */
    void *plan;
    int *plan_ok;
    /* pinned host */
    double *h_pb, *h_stats;
    /* graph */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int graph_nodes;
    double t_launch, t_last_ms;
} cuda_impl;

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#define CU(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            seterr(err, errlen, "CUDA: %s failed: %s (%s:%d)", #call, cudaGetErrorString(e_),   \
                   __FILE__, __LINE__);                                                          \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)
#define CB(call)                                                                                 \
    do {                                                                                         \
        cublasStatus_t e_ = (call);                                                              \
        if (e_ != CUBLAS_STATUS_SUCCESS) {                                                       \
            seterr(err, errlen, "cuBLAS: %s failed: %s (%s:%d)", #call, cublasGetStatusString(e_), \
                   __FILE__, __LINE__);                                                          \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)
#define NC(call)                                                                                 \
    do {                                                                                         \
        ncclResult_t e_ = (call);                                                                \
        if (e_ != ncclSuccess) {                                                                 \
            seterr(err, errlen, "NCCL: %s failed: %s (%s:%d)", #call, ncclGetErrorString(e_),    \
                   __FILE__, __LINE__);                                                          \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)

/* ------------------------------------------------------------------------
 * Devices and options
 * ---------------------------------------------------------------------- */

int ghf_cuda_device_count(void)
{
    int n = 0;
    /* no driver (cudaErrorInsufficientDriver), no device, ...: all mean 0 */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0 ? n : 0;
}

static int64_t env_i64(const char *name, int64_t def)
{
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    long long v = strtoll(s, &end, 10);
    return (*end == '\0') ? (int64_t)v : def;
}

void ghf_cuda_opts_default(ghf_cuda_opts *o)
{
    memset(o, 0, sizeof *o);
    o->reduce = GHF_CUDA_REDUCE_NCCL;
    o->graph = 1;
    o->plan = -1;
    o->plan_min_rows = 4096;
    o->zrange = 1;
    o->minb = 0;
    o->mma = -1;
    o->fused_dmax = GHF_CUDA_FUSED_DMAX;
    o->wide = 0;
    o->chunk_bytes = (int64_t)256 << 20;
    o->timeout_s = 600.0;
    o->x_dev = NULL;
    const char *s;
    if ((s = getenv("GHFIT_CUDA_REDUCE")) && strcmp(s, "mpi") == 0) o->reduce = GHF_CUDA_REDUCE_MPI;
    if ((s = getenv("GHFIT_CUDA_GRAPH")) && strcmp(s, "0") == 0) o->graph = 0;
    if ((s = getenv("GHFIT_CUDA_PLAN"))) {
        if (strcmp(s, "0") == 0) o->plan = 0;
        else if (strcmp(s, "1") == 0) o->plan = 1;
    }
    if ((s = getenv("GHFIT_CUDA_ZRANGE"))) {
        if (strcmp(s, "bound") == 0) o->zrange = 1;
        else if (strcmp(s, "exact") == 0) o->zrange = 0;
    }
    o->plan_min_rows = env_i64("GHFIT_CUDA_PLAN_MIN_ROWS", o->plan_min_rows);
    o->fused_dmax = (int)env_i64("GHFIT_CUDA_FUSED_DMAX", o->fused_dmax);
    o->minb = (int)env_i64("GHFIT_CUDA_MINB", o->minb);
    o->mma = (int)env_i64("GHFIT_CUDA_MMA", o->mma);
    o->wide = (int)env_i64("GHFIT_CUDA_WIDE", o->wide);
    o->chunk_bytes = env_i64("GHFIT_CUDA_CHUNK_MB", o->chunk_bytes >> 20) << 20;
    if ((s = getenv("GHFIT_CUDA_TIMEOUT_S"))) o->timeout_s = atof(s);
}

/* The device of this rank: one visible GPU -> 0 (the launcher bound it);
 * otherwise the one ghf_backend_map_devices chose for it, or else the
 * assignment of src/backend/devmap.h over comm's ranks (distinct GPUs while
 * there are enough; more ranks than GPUs share, and NCCL then refuses:
 * gpu_shared_on_node).  Collective. */
static int select_device(MPI_Comm comm, int *dev, int *local_size, char *err, size_t errlen)
{
    int rank, lsize, shared = 0, planned = 0;
    MPI_Comm node;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &lsize);
    MPI_Comm_free(&node);
    *local_size = lsize;
    const int ndev = ghf_cuda_device_count();
    int mapped = 0;
    const int have_plan = ghf__backend_device_plan(&planned);
    int all_plan = have_plan;
    MPI_Allreduce(&have_plan, &all_plan, 1, MPI_INT, MPI_MIN, comm);
    if (!all_plan) (void)ghf_devmap_collective(comm, comm, ndev > 0 ? ndev : 1, &mapped, &shared, NULL, 0);
    if (ndev <= 0) {
        seterr(err, errlen, "no usable CUDA device on this rank (no GPU, or no driver)");
        return 1;
    }
    if (ndev == 1)
        *dev = 0;
    else
        *dev = all_plan ? planned : mapped;
    if (*dev >= ndev) *dev = 0;
    return 0;
}

/* 1 if another rank of the node uses the same physical GPU (by PCI bus id). Collective. */
static int gpu_shared_on_node(MPI_Comm comm, int dev)
{
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(bus, sizeof bus, "unknown-%d", dev);
    }
    int rank, lsize;
    MPI_Comm node;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &lsize);
    char *all = calloc((size_t)lsize, sizeof bus);
    int dup = 0;
    if (all) {
        MPI_Allgather(bus, (int)sizeof bus, MPI_CHAR, all, (int)sizeof bus, MPI_CHAR, node);
        for (int i = 0; i < lsize; i++)
            for (int j = i + 1; j < lsize; j++)
                if (strncmp(all + (size_t)i * sizeof bus, all + (size_t)j * sizeof bus, sizeof bus) == 0)
                    dup = 1;
        free(all);
    }
    MPI_Comm_free(&node);
    int any = dup;
    MPI_Allreduce(&dup, &any, 1, MPI_INT, MPI_MAX, comm);
    return any;
}

int ghf_cuda_ranks_share_gpu(MPI_Comm comm)
{
    int dev = 0, lsize = 1;
    char e[256];
    const int bad = select_device(comm, &dev, &lsize, e, sizeof e);
    const int shared = gpu_shared_on_node(comm, bad ? 0 : dev);
    int any = bad;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
    return shared || any;
}

/* All ranks learn whether any failed; a rank that did not fail says so. */
static int agree_ok(MPI_Comm comm, int local_fail, char *err, size_t errlen, const char *what)
{
    int any = local_fail;
    MPI_Allreduce(&local_fail, &any, 1, MPI_INT, MPI_MAX, comm);
    if (any && !local_fail) seterr(err, errlen, "the CUDA backend failed on another rank (%s)", what);
    return !any;
}

/* ------------------------------------------------------------------------
 * Teardown
 * ---------------------------------------------------------------------- */

static void abort_nccl(cuda_impl *im)
{
    if (im->nccl) {
        ncclCommAbort(im->nccl);
        im->nccl = NULL;
    }
    im->failed = 1;
}

static void cuda_destroy(ghf_backend *be)
{
    if (!be) return;
    cuda_impl *im = be->impl;
    if (im) {
        if (im->exec) cudaGraphExecDestroy(im->exec);
        if (im->graph) cudaGraphDestroy(im->graph);
        if (im->nccl) {
            if (!im->failed && cudaStreamQuery(im->s) == cudaSuccess &&
                ncclCommFinalize(im->nccl) == ncclSuccess)
                ncclCommDestroy(im->nccl);
            else
                ncclCommAbort(im->nccl);
        }
        if (im->blas) cublasDestroy(im->blas);
        void *dptrs[] = {im->x,  im->x32, im->shift, im->w,    im->s4w,     im->pb,       im->stats,
                         im->part, im->qpart, im->s4, im->bound, im->q,   im->zw,  im->u,
                         im->zbuf, im->consts, im->plan, im->plan_ok, im->blas_ws, im->s6part};
        for (size_t i = 0; i < sizeof dptrs / sizeof dptrs[0]; i++)
            if (dptrs[i]) cudaFree(dptrs[i]);
        if (im->h_pb) cudaFreeHost(im->h_pb);
        if (im->h_stats) cudaFreeHost(im->h_stats);
        for (int i = 0; i < 3; i++)
            if (im->ev[i]) cudaEventDestroy(im->ev[i]);
        if (im->s) cudaStreamDestroy(im->s);
        (void)cudaGetLastError();
        free(im);
    }
    free(be);
}

/* ------------------------------------------------------------------------
 * One iteration's device work, enqueued on im->s (eagerly or under capture)
 * ---------------------------------------------------------------------- */

/* Timing events: inside a capture they must be external event-record nodes
 * (so replays record them); outside one, cudaEventRecordExternal is refused. */
static cudaError_t record_event(const cuda_impl *im, int i)
{
    return im->capturing ? cudaEventRecordWithFlags(im->ev[i], im->s, cudaEventRecordExternal)
                         : cudaEventRecord(im->ev[i], im->s);
}

static int enqueue(cuda_impl *im, char *err, size_t errlen)
{
    const cudaStream_t s = im->s;
    const int d = im->d;
    const int64_t n = im->n;
    const double *one = im->consts, *zero = im->consts + 1;
    const size_t out_bytes = sizeof(double) * (size_t)(im->len + GHF_CU_INFO_LEN);
    const void *plan = im->use_plan ? im->plan : NULL;
    const int *plan_ok = im->use_plan ? im->plan_ok : NULL;
    const double *wt = im->wtd ? im->w : NULL;

    CU(record_event(im, 0));
    CU(cudaMemcpyAsync(im->pb, im->h_pb, sizeof(double) * (size_t)ghf__cu_pb_len(d),
                       cudaMemcpyHostToDevice, s));
    CU(cudaMemsetAsync(im->stats, 0, out_bytes, s));
    if (n > 0 && im->onepass) { /* fused (d <= 12) or wide: one kernel reads the shard */
        if (im->fused) CU(ghf__cu_pb_to_const(im->pb, d, s)); /* the fused kernels read constant memory */
        if (im->use_plan) {
            if (im->o.zrange == 0)
                CU(im->wide ? ghf__cu_qmax_wide(im->x, im->x32, n, d, im->pb, im->grid, im->qpart, s)
                            : ghf__cu_qmax_fused(im->x, im->x32, n, d, im->pb, im->grid, im->qpart, s));
            CU(ghf__cu_plan_build(im->pb, d, im->o.zrange, im->qpart, im->grid, n, im->bound, im->plan,
                                  im->plan_ok, s));
        }
        CU(im->wide ? ghf__cu_estep_wide(im->x, im->x32, wt, n, d, im->pb, plan, plan_ok, im->grid, im->part, s)
                    : ghf__cu_estep_fused(im->x, im->x32, wt, n, d, im->pb, plan, plan_ok, im->grid, im->o.minb,
                                          im->o.mma, im->part, s));
        CU(ghf__cu_reduce(im->part, im->nent, im->grid, d, im->stats, s));
    } else if (n > 0) {
        const double *linv = im->pb + ghf__cu_pb_linv(d);
        for (int64_t r0 = 0; r0 < n; r0 += im->chunk) {
            const int64_t m = (n - r0 < im->chunk) ? n - r0 : im->chunk;
            CU(ghf__cu_center(im->x, n, r0, m, d, im->pb, im->zbuf, s));
            /* Z = (X - mu) L^-T: linv row-major is L^-T column-major (upper) */
            CB(cublasDtrmm(im->blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                           CUBLAS_DIAG_NON_UNIT, (int)m, d, one, linv, d, im->zbuf, (int)m, im->zbuf,
                           (int)m));
            CU(ghf__cu_qzw(im->zbuf, m, d, im->pb, im->q + r0, im->zw + r0, s));
        }
        if (im->use_plan) {
            if (im->o.zrange == 0) CU(ghf__cu_qmax_arr(im->q, n, im->grid, im->qpart, s));
            CU(ghf__cu_plan_build(im->pb, d, im->o.zrange, im->qpart, im->grid, n, im->bound, im->plan,
                                  im->plan_ok, s));
        }
        CU(ghf__cu_estep_rows(im->q, im->zw, wt, n, im->pb, plan, plan_ok, im->grid, im->u, im->part, s));
        CU(ghf__cu_reduce(im->part, GHF_CU_NSCAL, im->grid, d, im->stats, s));
        /* s5 = X^T u */
        CB(cublasDgemv(im->blas, CUBLAS_OP_T, (int)n, d, one, im->x, (int)n, im->u, 1, zero,
                       im->stats + ghf_stats_s5(d), 1));
        /* s6 = X^T diag(u) X.  One syrk/gemm with k = rows and a d x d result
         * runs on a handful of SMs; instead each chunk is split into batches of
         * kb rows whose d x d products come from one strided-batched GEMM, and
         * the partial products are summed in a fixed order (deterministic). */
        for (int64_t r0 = 0; r0 < n; r0 += im->chunk) {
            const int64_t m = (n - r0 < im->chunk) ? n - r0 : im->chunk;
            CB(cublasDdgmm(im->blas, CUBLAS_SIDE_LEFT, (int)m, d, im->x + r0, (int)n, im->u + r0, 1,
                           im->zbuf, (int)m));
            const int64_t nfull = m / im->kb, rem = m - nfull * im->kb;
            if (nfull > 0)
                CB(cublasDgemmStridedBatched(im->blas, CUBLAS_OP_T, CUBLAS_OP_N, d, d, (int)im->kb, one,
                                             im->x + r0, (int)n, (long long)im->kb, im->zbuf, (int)m,
                                             (long long)im->kb, zero, im->s6part, d,
                                             (long long)d * d, (int)nfull));
            if (rem > 0)
                CB(cublasDgemm(im->blas, CUBLAS_OP_T, CUBLAS_OP_N, d, d, (int)rem, one,
                               im->x + r0 + nfull * im->kb, (int)n, im->zbuf + nfull * im->kb, (int)m,
                               zero, im->s6part + (size_t)nfull * (size_t)d * (size_t)d, d));
            CU(ghf__cu_sum_s6(im->s6part, (int)(nfull + (rem > 0)), d, im->stats, s));
        }
    }
    if (im->wtd) /* sum w x and sum w, from the copy of the weights */
        CU(ghf__cu_finalize(n, d, im->pb, im->s4w, im->s4w + d, plan_ok, im->stats, s));
    else
        CU(ghf__cu_finalize(n, d, im->pb, n > 0 ? im->s4 : NULL, NULL, plan_ok, im->stats, s));
    CU(record_event(im, 1));
    if (im->o.reduce == GHF_CUDA_REDUCE_NCCL)
        NC(ncclAllReduce(im->stats, im->stats, (size_t)im->len, ncclDouble, ncclSum, im->nccl, s));
    CU(record_event(im, 2));
    CU(cudaMemcpyAsync(im->h_stats, im->stats, out_bytes, cudaMemcpyDeviceToHost, s));
    return 0;
fail:
    return 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Wait for the stream without blocking forever on a failed collective. */
static int wait_done(cuda_impl *im, char *err, size_t errlen)
{
    const double t0 = now_s();
    int backoff = 0;
    for (long it = 0;; it++) {
        const cudaError_t e = cudaStreamQuery(im->s);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotReady) {
            seterr(err, errlen, "CUDA error during the E-step: %s", cudaGetErrorString(e));
            return 1;
        }
        if (im->nccl && (it & 63) == 0) {
            ncclResult_t ar = ncclSuccess;
            const ncclResult_t r = ncclCommGetAsyncError(im->nccl, &ar);
            if (r != ncclSuccess || (ar != ncclSuccess && ar != ncclInProgress)) {
                seterr(err, errlen, "NCCL error during the all-reduce of the E-step statistics: %s (%s)",
                       ncclGetErrorString(r != ncclSuccess ? r : ar), ncclGetLastError(im->nccl));
                return 1;
            }
        }
        /* spin for the first 50 ms (an E-step takes a few ms; a sleep would add
         * the kernel's timer slack, ~50-70 us, to every iteration), then back
         * off so that a long step or a hung collective does not burn a core */
        if (!backoff && (it & 63) == 63 && now_s() - t0 > 0.05) backoff = 1;
        if (backoff) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
            if (im->o.timeout_s > 0 && (it & 255) == 255 && now_s() - t0 > im->o.timeout_s) {
                seterr(err, errlen, "the E-step did not finish within %.0f s (GHFIT_CUDA_TIMEOUT_S); "
                       "aborting (a rank may have left the fit)", im->o.timeout_s);
                return 1;
            }
        }
    }
}

/* Capture the iteration once (after a successful eager run); all ranks agree. */
static int capture_graph(cuda_impl *im, char *err, size_t errlen)
{
    int fail = 0;
    char msg[256] = "";
    cudaGraph_t g = NULL;
    cudaGraphExec_t ex = NULL;
    if (cudaStreamBeginCapture(im->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        snprintf(msg, sizeof msg, "cudaStreamBeginCapture failed");
        fail = 1;
    } else {
        im->capturing = 1;
        const int rc = enqueue(im, msg, sizeof msg);
        im->capturing = 0;
        const cudaError_t e = cudaStreamEndCapture(im->s, &g);
        if (rc || e != cudaSuccess) {
            if (!rc) snprintf(msg, sizeof msg, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
            fail = 1;
        } else if (cudaGraphInstantiate(&ex, g, 0) != cudaSuccess ||
                   cudaGraphUpload(ex, im->s) != cudaSuccess ||
                   cudaStreamSynchronize(im->s) != cudaSuccess) {
            snprintf(msg, sizeof msg, "cudaGraphInstantiate/Upload failed");
            fail = 1;
        }
    }
    (void)cudaGetLastError();
    /* the graph holds an NCCL collective: every rank must use it, or none */
    if (!agree_ok(im->comm, fail, err, errlen, "graph capture")) {
        if (ex) cudaGraphExecDestroy(ex);
        if (g) cudaGraphDestroy(g);
        if (im->rank == 0)
            fprintf(stderr, "ghfit: warning: CUDA graph capture failed (%s); launching eagerly\n",
                    fail ? msg : err);
        im->o.graph = 0;
        return 0;
    }
    im->graph = g;
    im->exec = ex;
    im->graph_wtd = im->wtd;
    size_t nn = 0;
    if (cudaGraphGetNodes(g, NULL, &nn) == cudaSuccess) im->graph_nodes = (int)nn;
    return 0;
}

/* Weighted EM: the rows' weights to the device, and their sums sum w x and
 * sum w (constant over the fit).  Once per backend, at its first weighted
 * call, which every rank makes together (be->weights is set on all ranks or
 * none); all ranks agree.  The host array must not change afterwards. */
static int upload_weights(cuda_impl *im, const double *w, char *err, size_t errlen)
{
    const int d = im->d;
    const int64_t n = im->n;
    cudaError_t e = cudaMalloc((void **)&im->w, sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (e == cudaSuccess) e = cudaMalloc((void **)&im->s4w, sizeof(double) * (size_t)(d + 1));
    if (e == cudaSuccess && n > 0)
        e = cudaMemcpyAsync(im->w, w, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice, im->s);
    if (e == cudaSuccess)
        e = ghf__cu_weighted_sums(im->x, im->x32, im->shift, im->w, n, d, im->grid, im->part, im->s4w, im->s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(im->s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        seterr(err, errlen, "CUDA: copying the observation weights to the device failed: %s", cudaGetErrorString(e));
    }
    if (!agree_ok(im->comm, e != cudaSuccess, err, errlen, "observation weights")) {
        im->failed = 1;
        return 1;
    }
    im->w_src = w;
    return 0;
}

static int cuda_estep(ghf_backend *be, const ghf_estep_input *in, double *stats, char *err,
                      size_t errlen)
{
    cuda_impl *im = be->impl;
    const int d = im->d;
    if (im->failed) {
        seterr(err, errlen, "the CUDA backend is unusable after an earlier error");
        return 1;
    }
    if (in->d != d) {
        seterr(err, errlen, "CUDA E-step: dimension %d does not match the shard's %d", in->d, d);
        return 1;
    }
    im->wtd = be->weights != NULL;
    if (im->wtd && !im->w_src && upload_weights(im, be->weights, err, errlen)) return 1;
    GHF_NVTX_PUSH("ghf cuda estep");
    /* stage this iteration's parameters (the previous launch has finished) */
    GHF_NVTX_PUSH("stage parameters");
    double *pb = im->h_pb;
    pb[GHF_CU_PB_P] = in->c.P;
    pb[GHF_CU_PB_A] = in->c.A;
    pb[GHF_CU_PB_B] = in->c.b;
    pb[GHF_CU_PB_LOGA] = in->c.log_A;
    pb[GHF_CU_PB_LLC] = in->c.ll_const;
    pb[GHF_CU_PB_STOP] = in->stop_request ? 1.0 : 0.0;
    pb[GHF_CU_PB_R] = in->c.R;
    pb[GHF_CU_PB_P2] = in->c.p2;
    pb[GHF_CU_PB_PA] = in->c.a;
    pb[GHF_CU_PB_W2] = in->c.w2;
    memcpy(pb + ghf__cu_pb_mu(d), in->mu, sizeof(double) * (size_t)d);
    memcpy(pb + ghf__cu_pb_w(d), in->w, sizeof(double) * (size_t)d);
    memcpy(pb + ghf__cu_pb_linv(d), in->linv, sizeof(double) * (size_t)d * (size_t)d);
    GHF_NVTX_POP();

    const double t0 = now_s();
    int rc = 0;
    GHF_NVTX_PUSH("launch");
    if (im->exec && im->graph_wtd == im->wtd) {
        const cudaError_t e = cudaGraphLaunch(im->exec, im->s);
        if (e != cudaSuccess) {
            seterr(err, errlen, "CUDA: cudaGraphLaunch failed: %s", cudaGetErrorString(e));
            rc = 1;
        }
    } else {
        rc = enqueue(im, err, errlen);
    }
    GHF_NVTX_POP();
    GHF_NVTX_PUSH("wait");
    if (rc == 0) rc = wait_done(im, err, errlen);
    GHF_NVTX_POP();
    im->t_launch += now_s() - t0;
    if (rc) {
        abort_nccl(im); /* the other ranks see a remote error instead of hanging */
        GHF_NVTX_POP();
        return 1;
    }
    float ms_c = 0.0f, ms_r = 0.0f;
    if (cudaEventElapsedTime(&ms_c, im->ev[0], im->ev[1]) != cudaSuccess ||
        cudaEventElapsedTime(&ms_r, im->ev[1], im->ev[2]) != cudaSuccess) {
        (void)cudaGetLastError();
        ms_c = ms_r = 0.0f;
    }
    be->t_estep += 1e-3 * ms_c;
    be->t_allreduce += 1e-3 * ms_r;
    im->t_last_ms = (double)ms_c + (double)ms_r;
    if (im->o.reduce == GHF_CUDA_REDUCE_MPI) {
        GHF_NVTX_PUSH("MPI_Allreduce");
        const double m0 = MPI_Wtime();
        const int mr = MPI_Allreduce(MPI_IN_PLACE, im->h_stats, im->len, MPI_DOUBLE, MPI_SUM, im->comm);
        be->t_allreduce += MPI_Wtime() - m0;
        GHF_NVTX_POP();
        if (mr != MPI_SUCCESS) {
            seterr(err, errlen, "MPI_Allreduce of the E-step statistics failed (code %d)", mr);
            im->failed = 1;
            GHF_NVTX_POP();
            return 1;
        }
    }
    memcpy(stats, im->h_stats, sizeof(double) * (size_t)im->len);
    be->last_used_plan = im->h_stats[im->len + GHF_CU_INFO_PLAN] != 0.0;
    be->n_calls++;
    /* first call done eagerly (warm-up for NCCL and cuBLAS): capture now */
    if (im->o.graph && !im->exec) {
        GHF_NVTX_PUSH("capture");
        rc = capture_graph(im, err, errlen);
        GHF_NVTX_POP();
    }
    GHF_NVTX_POP();
    return rc;
}

/* ------------------------------------------------------------------------
 * Creation
 * ---------------------------------------------------------------------- */

/* "cuda:" and every rank's device, in rank order (collective). */
static void device_name(const cuda_impl *im, char *buf, size_t len)
{
    int *all = malloc((size_t)im->size * sizeof(int)), ok = all != NULL, all_ok = 0;
    size_t off = (size_t)snprintf(buf, len, "cuda:");
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, im->comm);
    if (all_ok && MPI_Allgather(&im->dev, 1, MPI_INT, all, 1, MPI_INT, im->comm) == MPI_SUCCESS)
        for (int i = 0; i < im->size && off + 1 < len; i++) {
            const int w = snprintf(buf + off, len - off, i ? ",%d" : "%d", all[i]);
            if (w < 0 || (size_t)w >= len - off) { /* too many ranks for the buffer: the count */
                snprintf(buf, len, "cuda (%d ranks)", im->size);
                break;
            }
            off += (size_t)w;
        }
    else
        snprintf(buf, len, "cuda:%d", im->dev);
    free(all);
}

/* A float32 shard (host, row-major) to the device in chunks, column-major:
 * kept float32 on the fused and wide paths (x32), else widened and centred
 * once into the float64 x of the cuBLAS path. */
static int upload_f32(cuda_impl *im, const float *x32, char *err, size_t errlen)
{
    const int d = im->d;
    const int64_t n = im->n;
    float *tmp = NULL;
    if (im->onepass)
        CU(cudaMalloc((void **)&im->x32, sizeof(float) * (size_t)(n > 0 ? n : 1) * (size_t)d));
    else
        CU(cudaMalloc((void **)&im->x, sizeof(double) * (size_t)(n > 0 ? n : 1) * (size_t)d));
    if (n == 0) return 0;
    int64_t cm = ((int64_t)64 << 20) / ((int64_t)d * 4);
    if (cm < 1) cm = 1;
    if (cm > n) cm = n;
    CU(cudaMalloc((void **)&tmp, sizeof(float) * (size_t)cm * (size_t)d));
    for (int64_t r0 = 0; r0 < n; r0 += cm) {
        const int64_t m = (n - r0 < cm) ? n - r0 : cm;
        CU(cudaMemcpyAsync(tmp, x32 + (size_t)r0 * (size_t)d, sizeof(float) * (size_t)m * (size_t)d,
                           cudaMemcpyHostToDevice, im->s));
        CU(ghf__cu_transpose_in_f32(tmp, m, d, im->onepass ? im->x32 : NULL, im->onepass ? NULL : im->x, im->shift,
                                    n, r0, im->s));
        CU(cudaStreamSynchronize(im->s));
    }
    CU(cudaFree(tmp));
    return 0;
fail:
    if (tmp) cudaFree(tmp);
    return 1;
}

/* Device, buffers, shard, cuBLAS.  prefail: this rank already failed; it
 * still makes the same collective calls as the others, then fails. */
static int setup_local(cuda_impl *im, const double *x, int prefail, char *err, size_t errlen)
{
    const int d = im->d;
    const int64_t n = im->n;
    int lsize = 1;
    if (select_device(im->comm, &im->dev, &lsize, prefail ? NULL : err, errlen) || prefail) goto fail;
    CU(cudaSetDevice(im->dev));
    CU(cudaFree(0)); /* create the context before NCCL */
    CU(cudaDeviceGetAttribute(&im->sm_count, cudaDevAttrMultiProcessorCount, im->dev));
    int cc_major = 0;
    CU(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, im->dev));
    if (cc_major < 8) im->o.mma = 0; /* FP64 mma needs sm_80 */
    if (im->o.mma < 0) im->o.mma = ghf__cu_default_mma(d);
    CU(cudaStreamCreateWithFlags(&im->s, cudaStreamNonBlocking));
    for (int i = 0; i < 3; i++) CU(cudaEventCreate(&im->ev[i]));

    im->fused = d <= im->o.fused_dmax && d <= GHF_CUDA_FUSED_DMAX;
    /* ghf__cu_wide_smem(d) > 0: GHF_CUDA_FUSED_DMAX < d <= GHF_CUDA_WIDE_DMAX (a lowered
     * fused_dmax leaves d <= GHF_CUDA_FUSED_DMAX to the cuBLAS path, which the wide kernel
     * does not cover) */
    if (!im->fused && im->o.wide > 0 && cc_major >= 8 && ghf__cu_wide_smem(d) > 0) {
        int optin = 0;
        CU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, im->dev));
        if (ghf__cu_wide_prepare(d, optin) == cudaSuccess)
            im->wide = 1;
        else
            (void)cudaGetLastError(); /* too little shared memory on this device: the cuBLAS path */
    }
    im->onepass = im->fused || im->wide;
    if (!im->onepass && n > INT_MAX) {
        seterr(err, errlen, "CUDA backend: %lld rows on one rank exceed the cuBLAS path's limit (%d); "
               "use more ranks", (long long)n, INT_MAX);
        goto fail;
    }
    im->use_plan = im->o.plan == 1 || (im->o.plan < 0 && n >= im->o.plan_min_rows);
    if (n == 0) im->use_plan = 0;
    im->grid = ghf__cu_grid(n, im->sm_count);
    im->nent = im->onepass ? ghf__cu_fused_entries(d) : GHF_CU_NSCAL;
    int npart = im->nent > d + 1 ? im->nent : d + 1;

    const size_t xbytes = sizeof(double) * (size_t)(n > 0 ? n : 1) * (size_t)d;
    const size_t out_bytes = sizeof(double) * (size_t)(im->len + GHF_CU_INFO_LEN);
    CU(cudaMalloc((void **)&im->pb, sizeof(double) * (size_t)ghf__cu_pb_len(d)));
    CU(cudaMalloc((void **)&im->stats, out_bytes));
    CU(cudaMalloc((void **)&im->part, sizeof(double) * (size_t)npart * (size_t)im->grid));
    CU(cudaMalloc((void **)&im->qpart, sizeof(double) * (size_t)im->grid));
    CU(cudaMalloc((void **)&im->s4, sizeof(double) * (size_t)d));
    CU(cudaMalloc((void **)&im->bound, sizeof(double) * (size_t)(d + 1)));
    CU(cudaMalloc((void **)&im->plan, ghf__cu_plan_bytes()));
    CU(cudaMalloc((void **)&im->plan_ok, sizeof(int)));
    CU(cudaMemset(im->plan_ok, 0, sizeof(int)));
    CU(cudaMallocHost((void **)&im->h_pb, sizeof(double) * (size_t)ghf__cu_pb_len(d)));
    CU(cudaMallocHost((void **)&im->h_stats, out_bytes));
    memset(im->h_pb, 0, sizeof(double) * (size_t)ghf__cu_pb_len(d));
    CU(cudaMalloc((void **)&im->shift, sizeof(double) * (size_t)d));
    CU(cudaMemset(im->shift, 0, sizeof(double) * (size_t)d));
    if ((im->o.x32 || im->o.x32_dev) && im->o.shift) {
        CU(cudaMemcpy(im->shift, im->o.shift, sizeof(double) * (size_t)d, cudaMemcpyHostToDevice));
        if (im->onepass) /* these kernels widen in registers: the centring rides in the parameter block */
            memcpy(im->h_pb + ghf__cu_pb_shift(d), im->o.shift, sizeof(double) * (size_t)d);
    }

    /* the shard, column-major */
    if (im->o.x32_dev) {
        im->x32 = im->o.x32_dev; /* owned from here (freed on destroy) */
        im->o.x32_dev = NULL;
        if (!im->onepass) {
            seterr(err, errlen, "CUDA backend: float32 data on the device need the fused path (d <= %d, "
                   "or d <= %d with GHFIT_CUDA_WIDE=1)", GHF_CUDA_FUSED_DMAX, GHF_CUDA_WIDE_DMAX);
            goto fail;
        }
    } else if (im->o.x_dev) {
        im->x = im->o.x_dev;
        im->o.x_dev = NULL;
    } else if (im->o.x32) {
        if (upload_f32(im, im->o.x32, err, errlen)) goto fail;
    } else {
        CU(cudaMalloc((void **)&im->x, xbytes));
        if (n > 0) {
            int64_t cm = ((int64_t)64 << 20) / ((int64_t)d * 8);
            if (cm < 1) cm = 1;
            if (cm > n) cm = n;
            double *tmp = NULL;
            CU(cudaMalloc((void **)&tmp, sizeof(double) * (size_t)cm * (size_t)d));
            for (int64_t r0 = 0; r0 < n; r0 += cm) {
                const int64_t m = (n - r0 < cm) ? n - r0 : cm;
                cudaError_t e = cudaMemcpyAsync(tmp, x + (size_t)r0 * (size_t)d,
                                                sizeof(double) * (size_t)m * (size_t)d,
                                                cudaMemcpyHostToDevice, im->s);
                if (e == cudaSuccess) e = ghf__cu_transpose_in(tmp, m, d, im->x, n, r0, im->s);
                if (e == cudaSuccess) e = cudaStreamSynchronize(im->s);
                if (e != cudaSuccess) {
                    cudaFree(tmp);
                    seterr(err, errlen, "CUDA: copying the shard to the device failed: %s",
                           cudaGetErrorString(e));
                    goto fail;
                }
            }
            CU(cudaFree(tmp));
        }
    }
    CU(ghf__cu_shard_summary(im->x, im->x32, im->shift, n, d, im->grid, im->part, im->s4, im->bound, im->s));

    if (!im->onepass) {
        int64_t ch = im->o.chunk_bytes / ((int64_t)d * 8);
        if (ch < 1024) ch = 1024;
        if (ch > n) ch = n;
        if (ch < 1) ch = 1;
        im->chunk = ch;
        const size_t nb = sizeof(double) * (size_t)(n > 0 ? n : 1);
        CU(cudaMalloc((void **)&im->q, nb));
        CU(cudaMalloc((void **)&im->zw, nb));
        CU(cudaMalloc((void **)&im->u, nb));
        CU(cudaMalloc((void **)&im->zbuf, sizeof(double) * (size_t)ch * (size_t)d));
        /* s6 batches: about 2 per SM per chunk, partials within 64 MB */
        int64_t nbmax = ((int64_t)64 << 20) / ((int64_t)d * d * 8);
        if (nbmax > 2 * (int64_t)im->sm_count) nbmax = 2 * (int64_t)im->sm_count;
        if (nbmax < 1) nbmax = 1;
        int64_t kb = (ch + nbmax - 1) / nbmax;
        if (kb < 256) kb = 256;
        im->kb = kb;
        CU(cudaMalloc((void **)&im->s6part,
                      sizeof(double) * (size_t)(ch / kb + 1) * (size_t)d * (size_t)d));
        const double c[2] = {1.0, 0.0};
        CU(cudaMalloc((void **)&im->consts, sizeof c));
        CU(cudaMemcpy(im->consts, c, sizeof c, cudaMemcpyHostToDevice));
        const size_t ws = (size_t)32 << 20;
        CU(cudaMalloc(&im->blas_ws, ws));
        CB(cublasCreate(&im->blas));
        CB(cublasSetStream(im->blas, im->s)); /* resets the workspace: set it after */
        CB(cublasSetWorkspace(im->blas, im->blas_ws, ws));
        CB(cublasSetPointerMode(im->blas, CUBLAS_POINTER_MODE_DEVICE));
        CB(cublasSetAtomicsMode(im->blas, CUBLAS_ATOMICS_NOT_ALLOWED));
    }
    CU(cudaStreamSynchronize(im->s));
    if (im->o.reduce == GHF_CUDA_REDUCE_NCCL && im->size > 1 && gpu_shared_on_node(im->comm, im->dev)) {
        seterr(err, errlen, "several ranks share one GPU, which NCCL refuses; give each rank its own "
               "GPU, or set GHFIT_CUDA_REDUCE=mpi");
        return 1;
    }
    return 0;
fail:
    /* keep the collective call sequence of the other ranks */
    if (im->o.reduce == GHF_CUDA_REDUCE_NCCL && im->size > 1) (void)gpu_shared_on_node(im->comm, im->dev);
    return 1;
}

static int setup_nccl(cuda_impl *im, char *err, size_t errlen)
{
    struct {
        int status;
        ncclUniqueId id;
    } boot;
    memset(&boot, 0, sizeof boot);
    if (im->rank == 0) boot.status = (int)ncclGetUniqueId(&boot.id);
    MPI_Bcast(&boot, (int)sizeof boot, MPI_BYTE, 0, im->comm);
    if (boot.status != (int)ncclSuccess) {
        seterr(err, errlen, "NCCL: ncclGetUniqueId failed on rank 0: %s",
               ncclGetErrorString((ncclResult_t)boot.status));
        return 1;
    }
    MPI_Barrier(im->comm);
    NC(ncclCommInitRank(&im->nccl, im->size, boot.id, im->rank));
    return 0;
fail:
    im->nccl = NULL;
    return 1;
}

ghf_backend *ghf_backend_cuda_create_opts(MPI_Comm comm, const double *x, int64_t nrows, int d,
                                          const ghf_cuda_opts *o, char *err, size_t errlen)
{
    ghf_backend *be = calloc(1, sizeof *be);
    cuda_impl *im = calloc(1, sizeof *im);
    cuda_impl shadow; /* stands in for im when even that allocation failed */
    int fail = 0;
    if (!be || !im) {
        seterr(err, errlen, "out of memory creating the CUDA backend");
        free(be);
        free(im);
        be = NULL;
        im = &shadow;
        memset(im, 0, sizeof *im);
        fail = 1;
    } else {
        be->name = "cuda";
        be->estep = cuda_estep;
        be->destroy = cuda_destroy;
        be->impl = im;
    }
    im->comm = comm;
    MPI_Comm_rank(comm, &im->rank);
    MPI_Comm_size(comm, &im->size);
    im->n = nrows;
    im->d = d;
    im->len = ghf_stats_len(d);
    im->o = *o;
    if (!fail && (d < 1 || nrows < 0 || (nrows > 0 && !x && !o->x32 && !o->x_dev && !o->x32_dev))) {
        seterr(err, errlen, "CUDA backend: bad shard (%lld rows x %d)", (long long)nrows, d);
        fail = 1;
    }
    if (fail && (o->x_dev || o->x32_dev)) {
        if (o->x_dev) cudaFree(o->x_dev); /* ownership was handed to us */
        if (o->x32_dev) cudaFree(o->x32_dev);
        im->o.x_dev = NULL;
        im->o.x32_dev = NULL;
    }
    /* every rank makes the same collective calls, failed or not */
    fail = setup_local(im, x, fail, err, errlen);
    if (!agree_ok(comm, fail, err, errlen, "device setup")) goto fail_all;
    if (im->o.reduce == GHF_CUDA_REDUCE_NCCL) {
        fail = setup_nccl(im, err, errlen);
        if (!agree_ok(comm, fail, err, errlen, "NCCL initialisation")) goto fail_all;
    }
    device_name(im, be->device, sizeof be->device);
    return be;
fail_all:
    if (im->nccl) abort_nccl(im);
    if (be) cuda_destroy(be);
    return NULL;
}

ghf_backend *ghf_backend_cuda_create(MPI_Comm comm, const double *x, int64_t nrows, int d,
                                     char *err, size_t errlen)
{
    ghf_cuda_opts o;
    ghf_cuda_opts_default(&o);
    return ghf_backend_cuda_create_opts(comm, x, nrows, d, &o, err, errlen);
}

void ghf_cuda_get_info(const ghf_backend *be, ghf_cuda_info *info)
{
    memset(info, 0, sizeof *info);
    if (!be || !be->name || strcmp(be->name, "cuda") != 0 || !be->impl) return;
    const cuda_impl *im = be->impl;
    info->device = im->dev;
    info->fused = im->fused;
    info->wide = im->wide;
    info->f32 = im->x32 != NULL;
    info->mma = im->fused && im->o.mma > 0;
    info->graph = im->exec != NULL;
    info->reduce = (int)im->o.reduce;
    info->graph_nodes = im->graph_nodes;
    info->grid = im->grid;
    info->t_launch = im->t_launch;
    info->t_graph_ms_last = im->t_last_ms;
}

double *ghf_cuda_generate_device(MPI_Comm comm, int64_t n, int d, uint64_t seed, char *err,
                                 size_t errlen)
{
    int dev = 0, lsize = 1;
    double *x = NULL;
    if (select_device(comm, &dev, &lsize, err, errlen)) return NULL;
    CU(cudaSetDevice(dev));
    CU(cudaMalloc((void **)&x, sizeof(double) * (size_t)(n > 0 ? n : 1) * (size_t)d));
    CU(ghf__cu_generate(x, NULL, n, d, seed, 0));
    CU(cudaDeviceSynchronize());
    return x;
fail:
    if (x) cudaFree(x);
    return NULL;
}

float *ghf_cuda_generate_device_f32(MPI_Comm comm, int64_t n, int d, uint64_t seed, char *err,
                                    size_t errlen)
{
    int dev = 0, lsize = 1;
    float *x = NULL;
    if (select_device(comm, &dev, &lsize, err, errlen)) return NULL;
    CU(cudaSetDevice(dev));
    CU(cudaMalloc((void **)&x, sizeof(float) * (size_t)(n > 0 ? n : 1) * (size_t)d));
    CU(ghf__cu_generate(NULL, x, n, d, seed, 0));
    CU(cudaDeviceSynchronize());
    return x;
fail:
    if (x) cudaFree(x);
    return NULL;
}

#endif /* GHFIT_HAVE_CUDA */
