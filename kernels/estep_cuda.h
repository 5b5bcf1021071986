/* estep_cuda.h - internal interface between the CUDA backend's host code
 * (src/backend/cuda.c, plain C) and its kernels (kernels/estep_kernels.cu).
 *
 * Nothing here is public: the launchers enqueue work on a stream (and so can
 * be captured into a CUDA graph); they never synchronise and never allocate.
 * Each returns the cudaError_t of its launch (cudaGetLastError).
 *
 * Device data layout (fixed for a fit, so a captured graph stays valid):
 *   xt     [d][n]   the shard, column-major (xt[j*n + i] = x_ij): coalesced
 *                   loads when one thread handles one row, and an n x d
 *                   column-major matrix (ld n) for cuBLAS;
 *   xt32   [d][n]   instead of xt on the fused path when the data set is
 *                   float32: the file's values, widened in registers
 *                   (x_ij = (double)xt32[j*n + i] - shift_j, the same
 *                   double the host's centring gives); every launcher that
 *                   reads the shard takes (xt, xt32), exactly one non-NULL;
 *   wt     [n]      observation weights (weighted EM), or NULL;
 *   pb     parameter block (doubles, layout GHF_CU_PB_*), written each
 *          iteration by one memcpy from pinned host staging;
 *   stats  [ghf_stats_len(d) + GHF_CU_INFO_LEN] the statistics (estep.h
 *          layout) followed by per-rank info that is copied back but not
 *          all-reduced. */
#ifndef GHF_ESTEP_CUDA_H
#define GHF_ESTEP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "estep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameter block: header, then mu[d], w[d], linv[d*d] (row-major, lower),
 * shift[d] (the centring of a float32 shard, xt32; zeros otherwise). */
enum {
    GHF_CU_PB_P = 0,    /* posterior order (also the plan's order) */
    GHF_CU_PB_A = 1,    /* posterior a */
    GHF_CU_PB_B = 2,    /* prior b */
    GHF_CU_PB_LOGA = 3, /* log A */
    GHF_CU_PB_LLC = 4,  /* log-density constant */
    GHF_CU_PB_STOP = 5, /* this rank's stop request (0/1) */
    GHF_CU_PB_R = 6,    /* sqrt(p^2 + ab) of the prior */
    GHF_CU_PB_P2 = 7,   /* p^2 */
    GHF_CU_PB_PA = 8,   /* prior a */
    GHF_CU_PB_W2 = 9,   /* w.w */
    GHF_CU_PB_HDR = 12
};
GHF_HD static inline int ghf__cu_pb_mu(int d) { (void)d; return GHF_CU_PB_HDR; }
GHF_HD static inline int ghf__cu_pb_w(int d) { return GHF_CU_PB_HDR + d; }
GHF_HD static inline int ghf__cu_pb_linv(int d) { return GHF_CU_PB_HDR + 2 * d; }
GHF_HD static inline int ghf__cu_pb_shift(int d) { return GHF_CU_PB_HDR + 2 * d + d * d; }
GHF_HD static inline int ghf__cu_pb_len(int d) { return GHF_CU_PB_HDR + 3 * d + d * d; }

/* Per-rank info after the statistics: [0] 1 if the plan was used. */
#define GHF_CU_INFO_LEN 2
#define GHF_CU_INFO_PLAN 0

/* Largest d with a fused (register-resident) kernel.  Each thread keeps
 * 5 + d + d(d+1)/2 running sums in registers (95 doubles = 190 registers at
 * d = 12); beyond that they spill, and the cuBLAS path takes over.  The
 * dispatch in estep_kernels.cu instantiates d = 1 .. GHF_CUDA_FUSED_DMAX. */
#define GHF_CUDA_FUSED_DMAX 12

/* Threads per block of the row kernels, and the number of "entries" the
 * fused kernel reduces per block: s1 s2 s3 ll nbad |zw| s5[d] s6 lower[d(d+1)/2]. */
#define GHF_CU_TPB 128
#define GHF_CU_NSCAL 6
static inline int ghf__cu_fused_entries(int d) { return GHF_CU_NSCAL + d + d * (d + 1) / 2; }

/* Grid size (number of blocks) of the grid-stride row kernels for n rows on
 * this device: fixed per fit, so the partial sums, and hence the results,
 * are bitwise repeatable. */
int ghf__cu_grid(int64_t n, int sm_count);

/* ---- one-time setup ---------------------------------------------------- */
/* src: m rows x d, row-major (device).  Writes xt[j*n + r0 + i]. */
cudaError_t ghf__cu_transpose_in(const double *src, int64_t m, int d, double *xt, int64_t n,
                                 int64_t r0, cudaStream_t s);
/* The same from float32 rows: into xt32 (float, unchanged) when xt32 is not
 * NULL, else widened and centred into xt: xt[j*n + r0 + i] = (double)src - shift[j]
 * (shift: d doubles on the device). */
cudaError_t ghf__cu_transpose_in_f32(const float *src, int64_t m, int d, float *xt32, double *xt,
                                     const double *shift, int64_t n, int64_t r0, cudaStream_t s);
/* Deterministic column sums of the shard (s4, constant over the fit) into
 * s4[d], and the bound data for the "bound" z-range mode: bound[0] =
 * max_i |x_i - c| with c = s4 / n, bound[1..d] = c.  part: scratch of
 * (d + 1) * grid doubles.  shift: the centring of xt32 (device; unused for xt). */
cudaError_t ghf__cu_shard_summary(const double *xt, const float *xt32, const double *shift, int64_t n,
                                  int d, int grid, double *part, double *s4, double *bound,
                                  cudaStream_t s);
/* Weighted EM, once per data set: out[j] = sum_i wt_i x_ij (j < d) and
 * out[d] = sum_i wt_i, deterministic (fixed order).  part: (d + 1) * grid. */
cudaError_t ghf__cu_weighted_sums(const double *xt, const float *xt32, const double *shift,
                                  const double *wt, int64_t n, int d, int grid, double *part,
                                  double *out, cudaStream_t s);
/* Synthetic data for benchmarks, generated on the device (column-major):
 * a normal variance mixture with log-normal mixing, deterministic in seed;
 * into xt32 (rounded to float) when it is not NULL, else into xt. */
cudaError_t ghf__cu_generate(double *xt, float *xt32, int64_t n, int d, uint64_t seed, cudaStream_t s);

/* ---- per iteration (captured) ------------------------------------------ */
/* Fused path (d <= GHF_CUDA_FUSED_DMAX).  ghf__cu_pb_to_const first: the
 * fused kernels read the parameter block from constant memory. */
cudaError_t ghf__cu_pb_to_const(const double *pb, int d, cudaStream_t s);
cudaError_t ghf__cu_qmax_fused(const double *xt, const float *xt32, int64_t n, int d, const double *pb,
                               int grid, double *qpart, cudaStream_t s);
/* mma: 1 s5 and s6 on the FP64 tensor cores (sm_80 or newer only), 0 in
 * per-thread registers, -1 for ghf__cu_default_mma(d); minb (register
 * kernel): 2, 3 or 4 resident blocks per SM for the register allocation, or 0
 * for ghf__cu_default_minb(d) (a float32 shard, xt32, always uses the
 * default).  wt: the rows' weights or NULL (every per-row contribution times
 * its weight, as the CPU backend: a row of weight 0 adds nothing). */
int ghf__cu_default_mma(int d);
int ghf__cu_default_minb(int d);
cudaError_t ghf__cu_estep_fused(const double *xt, const float *xt32, const double *wt, int64_t n, int d,
                                const double *pb, const void *plan, const int *plan_ok, int grid,
                                int minb, int mma, double *part, cudaStream_t s);
/* Wide fused path (GHF_CUDA_FUSED_DMAX < d <= GHF_CUDA_WIDE_DMAX, sm_80 and
 * newer; kernels/estep_wide.cu): one pass over the shard, the quadratic
 * forms and s6 on the FP64 tensor cores, partials of the fused layout
 * (ghf__cu_fused_entries(d) x grid, then ghf__cu_reduce).  Reads the
 * parameter block from global memory (no ghf__cu_pb_to_const).
 * ghf__cu_wide_smem: the dynamic shared memory per block (0: d out of
 * range); ghf__cu_wide_prepare: once, before the first launch at this d
 * (raises the kernels' shared-memory limit; cudaErrorInvalidValue, nothing
 * changed, when d is out of range or the dynamic plus a kernel's static
 * shared memory exceeds optin, the device's opt-in limit per block). */
#define GHF_CUDA_WIDE_DMAX 128
#define GHF_CU_WIDE_TPB 256
size_t ghf__cu_wide_smem(int d);
cudaError_t ghf__cu_wide_prepare(int d, int optin);
cudaError_t ghf__cu_qmax_wide(const double *xt, const float *xt32, int64_t n, int d, const double *pb, int grid,
                              double *qpart, cudaStream_t s);
cudaError_t ghf__cu_estep_wide(const double *xt, const float *xt32, const double *wt, int64_t n, int d,
                               const double *pb, const void *plan, const int *plan_ok, int grid, double *part,
                               cudaStream_t s);

/* Reduce part[ne][grid] (entries of the fused layout, or only the first
 * GHF_CU_NSCAL when ne == GHF_CU_NSCAL) into stats (estep.h layout). */
cudaError_t ghf__cu_reduce(const double *part, int ne, int grid, int d, double *stats,
                           cudaStream_t s);

/* cuBLAS path: center a chunk (rows r0..r0+m) into zc (m x d, ld m); after
 * the caller's trmm, per-row q and zw of the chunk. */
cudaError_t ghf__cu_center(const double *xt, int64_t n, int64_t r0, int64_t m, int d,
                           const double *pb, double *zc, cudaStream_t s);
cudaError_t ghf__cu_qzw(const double *zc, int64_t m, int d, const double *pb, double *q,
                        double *zw, cudaStream_t s);
/* stats[s6 lower triangle] += sum over p < nparts of part[p][a + b d] (column-major
 * d x d partial products), in order p = 0, 1, ... */
cudaError_t ghf__cu_sum_s6(const double *part, int nparts, int d, double *stats, cudaStream_t s);
cudaError_t ghf__cu_qmax_arr(const double *q, int64_t n, int grid, double *qpart, cudaStream_t s);
/* wt: the rows' weights or NULL; u[i] is then the weighted E[1/Y|x_i]. */
cudaError_t ghf__cu_estep_rows(const double *q, const double *zw, const double *wt, int64_t n,
                               const double *pb, const void *plan, const int *plan_ok, int grid,
                               double *u, double *part, cudaStream_t s);

/* The plan at the iteration's order over [arg(0), arg(qmax)]: qmax from
 * qpart[grid] (mode 0, exact) or from the bound (mode 1: |L^-1 (x - mu)| <=
 * |L^-1|_F (R + |c - mu|)).  Writes *plan_ok (0: evaluate directly), 1 when
 * the setup succeeded and the shard has at least 4 rows per plan node (the
 * CPU backend's rule). */
cudaError_t ghf__cu_plan_build(const double *pb, int d, int mode, const double *qpart, int grid,
                               int64_t n, const double *bound, void *plan, int *plan_ok,
                               cudaStream_t s);

/* stats[N] = n (or *wsum when wsum is not NULL: weighted EM), stats[STOP] =
 * pb[STOP], s4 copied, s6 mirrored (upper from lower, row-major),
 * info[PLAN] = *plan_ok. */
cudaError_t ghf__cu_finalize(int64_t n, int d, const double *pb, const double *s4, const double *wsum,
                             const int *plan_ok, double *stats, cudaStream_t s);

/* sizeof(ghf_bessel_plan), for the host allocation. */
size_t ghf__cu_plan_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* GHF_ESTEP_CUDA_H */
