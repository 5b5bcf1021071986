/* estep_kernels.cu - the CUDA E-step kernels and their launchers.
 *
 * Per iteration (all enqueued on one stream, captured once into a graph by
 * src/backend/cuda.c):
 *   fused path (d <= GHF_CUDA_FUSED_DMAX), one thread per row, all in
 *   registers:
 *     k_qmax_fused   max q over the shard (block partials)       [plan, exact]
 *     k_plan_*       the Bessel plan at the iteration's order      [plan]
 *     k_estep_fused  q, zw, Bessel, moments, log-density, and the running
 *                    sums s1 s2 s3 ll nbad s5 s6 (per-thread registers ->
 *                    warp shuffles -> one partial per block)
 *     k_reduce       block partials -> statistics, in a fixed order
 *   cuBLAS path (larger d): per chunk of rows k_center + trmm + k_qzw
 *     (q, zw stored per row), k_qmax_arr, k_plan_*, k_estep_rows (u per row
 *     + scalar partials), k_reduce, then gemv (s5) and dgmm + syrkx (s6) in
 *     the host code;
 *   k_finalize: n, stop flag, s4 (constant over the fit), mirrored s6.
 *
 * Element type: a float32 shard stays float32 on the fused path (xt32) and
 * each load widens it in registers and subtracts the host's centring
 * (load_row), so every kernel sees the same doubles as from a float64
 * shard; all arithmetic and sums are float64.  The cuBLAS path gets the
 * float32 shard widened once, at upload, into its float64 xt.
 *
 * Weights (weighted EM, wt not NULL): each row's u, v, l, log f and |zw|
 * times its weight before the sums, a row of weight 0 contributing exact
 * zeros (add_point_w, as the CPU backend's block_weigh); s4 and the count
 * are then sum w x and sum w, once per data set (ghf__cu_weighted_sums).
 *
 * Determinism: every sum is a per-thread sum in row order, a fixed shuffle
 * tree, a fixed order over warps, and a fixed-order reduction over a grid
 * whose size is fixed for the fit.  No floating-point atomics anywhere, so
 * replays give the same bits.  Min/max are exact in any order. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "estep_device.cuh"

/* ------------------------------------------------------------------------
 * Device helpers
 * ---------------------------------------------------------------------- */

/* The fused kernels' copy of the parameter block, in constant memory: every
 * thread reads the same mu, w and L^-1 entries, which then enter the
 * multiply-adds as constant-bank operands instead of one shared-memory load
 * each.  Refreshed from pb by a device-to-device copy node each iteration
 * (ghf__cu_pb_to_const); one copy per process and device, so two fused
 * backends must not run concurrently on one device (the program never does). */
#define GHF_CU_CPB_LEN (GHF_CU_PB_HDR + 3 * GHF_CUDA_FUSED_DMAX + GHF_CUDA_FUSED_DMAX * GHF_CUDA_FUSED_DMAX)
__constant__ double c_pb[GHF_CU_CPB_LEN];

/* Index in the statistics buffer of entry e of the fused partial layout. */
__device__ __forceinline__ int entry_index(int e, int d)
{
    if (e < GHF_CU_NSCAL) {
        const int m[GHF_CU_NSCAL] = {GHF_ST_S1, GHF_ST_S2, GHF_ST_S3, GHF_ST_LL, GHF_ST_NBAD, GHF_ST_ZWABS};
        return m[e];
    }
    e -= GHF_CU_NSCAL;
    if (e < d) return ghf_stats_s5(d) + e;
    e -= d;
    int a = 0;
    while ((a + 1) * (a + 2) / 2 <= e) a++;
    const int b = e - a * (a + 1) / 2;
    return ghf_stats_s6(d) + a * d + b;
}

/* Row i of the shard into registers: float64 as stored; float32 widened
 * and centred by the parameter block's shift (exactly the host's
 * x - shift of the widened value). */
template <int D>
__device__ __forceinline__ void load_row(const double *__restrict__ xt, int64_t n, int64_t i, double (&x)[D])
{
#pragma unroll
    for (int j = 0; j < D; j++) x[j] = __ldg(xt + (int64_t)j * n + i);
}

template <int D>
__device__ __forceinline__ void load_row(const float *__restrict__ xt, int64_t n, int64_t i, double (&x)[D])
{
#pragma unroll
    for (int j = 0; j < D; j++) x[j] = (double)__ldg(xt + (int64_t)j * n + i) - c_pb[ghf__cu_pb_shift(D) + j];
}

/* q = |L^-1 (x - mu)|^2 and zw = (L^-1 (x - mu)).w for one row, from the
 * constant parameter block; the same code (hence the same bits) in the range
 * pass and the E-step pass. */
template <int D>
__device__ __forceinline__ void row_qzw(const double (&x)[D], double &q, double &zw)
{
    double xc[D];
#pragma unroll
    for (int k = 0; k < D; k++) xc[k] = x[k] - c_pb[GHF_CU_PB_HDR + k];
    double qq = 0.0, zz = 0.0;
#pragma unroll
    for (int a = 0; a < D; a++) {
        double z = 0.0;
#pragma unroll
        for (int k = 0; k <= a; k++) z = fma(c_pb[GHF_CU_PB_HDR + 2 * D + a * D + k], xc[k], z);
        qq = fma(z, z, qq);
        zz = fma(z, c_pb[GHF_CU_PB_HDR + D + a], zz);
    }
    q = qq;
    zw = zz;
}

/* ------------------------------------------------------------------------
 * Fused path kernels
 * ---------------------------------------------------------------------- */

template <int D, typename T>
__global__ void __launch_bounds__(GHF_CU_TPB) k_qmax_fused(const T *__restrict__ xt, int64_t n,
                                                           const double *__restrict__ pb,
                                                           double *__restrict__ qpart)
{
    (void)pb;
    double m = 0.0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double x[D];
        load_row<D>(xt, n, i, x);
        double q, zw;
        row_qzw<D>(x, q, zw);
        if (isfinite(q)) m = fmax(m, q);
    }
    m = block_max(m);
    if (threadIdx.x == 0) qpart[blockIdx.x] = m;
}

/* MINB: resident blocks per SM the register allocation must allow (2: no
 * spills up to D = 12; 3 and 4 trade spills for occupancy; chosen at run time,
 * see ghf__cu_estep_fused). */
template <int D, int MINB, typename T>
__global__ void __launch_bounds__(GHF_CU_TPB, MINB)
    k_estep_fused(const T *__restrict__ xt, const double *__restrict__ wt, int64_t n,
                  const double *__restrict__ pb, const ghf_bessel_plan *__restrict__ plan,
                  const int *__restrict__ plan_ok, double *__restrict__ part)
{
    constexpr int NE = GHF_CU_NSCAL + D + D * (D + 1) / 2;
    constexpr int S5 = GHF_CU_NSCAL, S6 = GHF_CU_NSCAL + D;
    __shared__ double s_red[GHF_CU_TPB / 32][NE];
    (void)pb;
    const ghf_estep_consts c = load_consts(c_pb);
    const int use_plan = plan_ok ? *plan_ok : 0;

    double acc[NE];
#pragma unroll
    for (int e = 0; e < NE; e++) acc[e] = 0.0;

    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double x[D];
        load_row<D>(xt, n, i, x);
        double q, zw;
        row_qzw<D>(x, q, zw);
        const double u = add_row(acc, row_point(c, q, zw, plan, use_plan), zw, wt, i);
#pragma unroll
        for (int a = 0; a < D; a++) {
            const double ux = u * x[a];
            acc[S5 + a] += ux;
#pragma unroll
            for (int b = 0; b <= a; b++)
                acc[S6 + a * (a + 1) / 2 + b] = fma(ux, x[b], acc[S6 + a * (a + 1) / 2 + b]);
        }
    }

    warp_sums_to_shared(acc, s_red);
    write_block_partials(s_red, part);
}

/* The same statistics with s5 and s6 from the FP64 tensor cores (sm_80+).
 * Each warp takes 32 rows at a time: every lane evaluates its row's scalar
 * part (quadratic form, Bessel plan, moments) as above, then the warp stages
 * the rows' x (plus a column of ones) and u in shared memory and forms
 * [X 1]^T diag(u) [X 1] with mma.m8n8k4 f64 in 8 steps of 4 rows, so that a lane
 * holds 2 accumulators per 8 x 8 tile instead of D (D + 3) / 2 sums of its
 * own: the register count, hence the occupancy, no longer grows with D.
 * Row D of the product is s5; its lower triangle above is s6.  Fixed order
 * throughout (deterministic); D + 1 <= 16. */

template <int D, int MINB, typename T>
__global__ void __launch_bounds__(GHF_CU_TPB, MINB)
    k_estep_mma(const T *__restrict__ xt, const double *__restrict__ wt, int64_t n,
                const double *__restrict__ pb, const ghf_bessel_plan *__restrict__ plan,
                const int *__restrict__ plan_ok, double *__restrict__ part)
{
    constexpr int NT = (D + 1 + 7) / 8; /* 8 x 8 tiles per side of the (D+1) x (D+1) product */
    constexpr int LD = 8 * NT + 4;      /* staging row stride: conflict-free fragment loads */
    constexpr int NW = GHF_CU_TPB / 32;
    constexpr int NE = GHF_CU_NSCAL + D + D * (D + 1) / 2;
    constexpr int S5 = GHF_CU_NSCAL, S6 = GHF_CU_NSCAL + D;
    __shared__ double s_x[NW][32 * LD], s_u[NW][32];
    __shared__ double s_red[NW][NE];
    (void)pb;
    const ghf_estep_consts c = load_consts(c_pb);
    const int use_plan = plan_ok ? *plan_ok : 0;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int grp = lane >> 2, tig = lane & 3;
    double *sx = s_x[warp], *su = s_u[warp];
    for (int k = lane; k < 32 * LD; k += 32) sx[k] = 0.0; /* padding columns stay zero */
    __syncwarp();

    double acc[GHF_CU_NSCAL];
#pragma unroll
    for (int e = 0; e < GHF_CU_NSCAL; e++) acc[e] = 0.0;
    double cf[NT][NT][2];
#pragma unroll
    for (int t0 = 0; t0 < NT; t0++)
#pragma unroll
        for (int t1 = 0; t1 < NT; t1++) cf[t0][t1][0] = cf[t0][t1][1] = 0.0;

    const int64_t wstride = (int64_t)gridDim.x * NW * 32;
    for (int64_t base = ((int64_t)blockIdx.x * NW + warp) * 32; base < n; base += wstride) {
        const int64_t i = base + lane;
        const bool in = i < n;
        double x[D];
        if (in) {
            load_row<D>(xt, n, i, x);
        } else {
#pragma unroll
            for (int j = 0; j < D; j++) x[j] = 0.0;
        }
        double u = 0.0;
        if (in) {
            double q, zw;
            row_qzw<D>(x, q, zw);
            u = add_row(acc, row_point(c, q, zw, plan, use_plan), zw, wt, i);
        }
#pragma unroll
        for (int j = 0; j < D; j++) sx[lane * LD + j] = x[j];
        sx[lane * LD + D] = in ? 1.0 : 0.0;
        su[lane] = u;
        __syncwarp();
#pragma unroll
        for (int ks = 0; ks < 8; ks++) {
            const int row = 4 * ks + tig;
            const double ur = su[row];
            double a[NT], b[NT];
#pragma unroll
            for (int t = 0; t < NT; t++) {
                a[t] = sx[row * LD + 8 * t + grp];
                b[t] = ur * a[t];
            }
#pragma unroll
            for (int t0 = 0; t0 < NT; t0++)
#pragma unroll
                for (int t1 = 0; t1 <= t0; t1++) mma_f64(cf[t0][t1], a[t0], b[t1]);
        }
        __syncwarp();
    }

    /* lane holds rows m = 8 t0 + grp, columns 8 t1 + 2 tig + {0, 1} */
#pragma unroll
    for (int t0 = 0; t0 < NT; t0++)
#pragma unroll
        for (int t1 = 0; t1 <= t0; t1++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int m = 8 * t0 + grp, col = 8 * t1 + 2 * tig + h;
                if (m < D && col <= m) s_red[warp][S6 + m * (m + 1) / 2 + col] = cf[t0][t1][h];
                else if (m == D && col < D) s_red[warp][S5 + col] = cf[t0][t1][h];
            }
    warp_sums_to_shared(acc, s_red);
    write_block_partials(s_red, part);
}

/* part[ne][grid] -> stats; one block per entry, fixed order. */
__global__ void k_reduce(const double *__restrict__ part, int grid, int d, double *__restrict__ stats)
{
    const int e = blockIdx.x;
    const double *p = part + (int64_t)e * grid;
    double v = 0.0;
    for (int g = threadIdx.x; g < grid; g += blockDim.x) v += p[g];
    v = block_sum(v);
    if (threadIdx.x == 0) stats[entry_index(e, d)] = v;
}

/* ------------------------------------------------------------------------
 * cuBLAS path kernels
 * ---------------------------------------------------------------------- */

__global__ void k_center(const double *__restrict__ xt, int64_t n, int64_t r0, int64_t m, int d,
                         const double *__restrict__ pb, double *__restrict__ zc)
{
    const double *mu = pb + ghf__cu_pb_mu(d);
    const int64_t total = m * d, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const int64_t j = e / m, i = e - j * m;
        zc[e] = xt[j * n + r0 + i] - mu[j];
    }
}

__global__ void k_qzw(const double *__restrict__ zc, int64_t m, int d, const double *__restrict__ pb,
                      double *__restrict__ q, double *__restrict__ zw)
{
    const double *w = pb + ghf__cu_pb_w(d);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += stride) {
        double qq = 0.0, zz = 0.0;
        for (int j = 0; j < d; j++) {
            const double z = zc[(int64_t)j * m + i];
            qq += z * z;
            zz += z * w[j];
        }
        q[i] = qq;
        zw[i] = zz;
    }
}

__global__ void k_sum_s6(const double *__restrict__ part, int nparts, int d, double *__restrict__ stats)
{
    const int64_t dd = (int64_t)d * d;
    double *s6 = stats + ghf_stats_s6(d);
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < dd;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int a = (int)(k / d), b = (int)(k - (int64_t)a * d);
        if (b > a) continue;
        double v = 0.0;
        for (int p = 0; p < nparts; p++) v += part[p * dd + a + (int64_t)b * d];
        s6[k] += v;
    }
}

__global__ void k_qmax_arr(const double *__restrict__ q, int64_t n, double *__restrict__ qpart)
{
    double m = 0.0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const double v = q[i];
        if (isfinite(v)) m = fmax(m, v);
    }
    m = block_max(m);
    if (threadIdx.x == 0) qpart[blockIdx.x] = m;
}

__global__ void __launch_bounds__(GHF_CU_TPB, 4) /* 128 registers: no spills (ptxas -v) */
    k_estep_rows(const double *__restrict__ q, const double *__restrict__ zw, const double *__restrict__ wt,
                 int64_t n, const double *__restrict__ pb, const ghf_bessel_plan *__restrict__ plan,
                 const int *__restrict__ plan_ok, double *__restrict__ u, double *__restrict__ part)
{
    __shared__ double s_red[GHF_CU_TPB / 32][GHF_CU_NSCAL];
    const ghf_estep_consts c = load_consts(pb);
    const int use_plan = plan_ok ? *plan_ok : 0;
    double acc[GHF_CU_NSCAL] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u[i] = add_row(acc, row_point(c, q[i], zw[i], plan, use_plan), zw[i], wt, i);
    }
    warp_sums_to_shared(acc, s_red);
    write_block_partials(s_red, part);
}

/* ------------------------------------------------------------------------
 * The Bessel plan, built on the device
 * ---------------------------------------------------------------------- */

/* Rows per plan node below which the plan does not pay (as on the CPU). */
#define GHF_CU_PLAN_ROWS_PER_NODE 4

__global__ void k_plan_setup(const double *__restrict__ pb, int d, int mode,
                             const double *__restrict__ qpart, int grid, int64_t n,
                             const double *__restrict__ bound, ghf_bessel_plan *plan, int *plan_ok)
{
    double qmax = 0.0;
    if (mode == 0) {
        for (int g = threadIdx.x; g < grid; g += blockDim.x) qmax = fmax(qmax, qpart[g]);
        qmax = block_max(qmax);
    }
    if (threadIdx.x != 0) return;
    const ghf_estep_consts c = load_consts(pb);
    if (mode == 1) {
        /* |L^-1 (x - mu)| <= |L^-1|_F (|x - c| + |c - mu|), |x - c| <= R */
        const double *linv = pb + ghf__cu_pb_linv(d), *mu = pb + ghf__cu_pb_mu(d);
        double f2 = 0.0, dist2 = 0.0;
        for (int a = 0; a < d; a++)
            for (int k = 0; k <= a; k++) f2 += linv[a * d + k] * linv[a * d + k];
        for (int j = 0; j < d; j++) {
            const double t = bound[1 + j] - mu[j];
            dist2 += t * t;
        }
        const double r = sqrt(f2) * (bound[0] + sqrt(dist2));
        qmax = r * r * (1.0 + 1e-12);
    }
    const double zmin = ghf_estep_arg(&c, 0.0), zmax = ghf_estep_arg(&c, qmax);
    int ok = 0;
    if (isfinite(zmax) && zmax > 0.0 && ghf_bessel_plan_setup(plan, c.P, zmin, zmax) == 0)
        ok = (int64_t)ghf_bessel_plan_num_nodes(plan) * GHF_CU_PLAN_ROWS_PER_NODE <= n;
    *plan_ok = ok;
}

__global__ void k_plan_nodes(ghf_bessel_plan *plan, const int *plan_ok)
{
    if (!*plan_ok) return;
    const int nn = ghf_bessel_plan_num_nodes(plan);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nn; i += gridDim.x * blockDim.x)
        ghf_bessel_plan_node(plan, i);
}

__global__ void k_plan_pieces(ghf_bessel_plan *plan, const int *plan_ok)
{
    if (!*plan_ok) return;
    const int np = ghf_bessel_plan_num_pieces(plan);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < np; i += gridDim.x * blockDim.x)
        ghf_bessel_plan_finish_piece(plan, i);
}

/* ------------------------------------------------------------------------
 * Finalisation and one-time kernels
 * ---------------------------------------------------------------------- */

__global__ void k_finalize(int64_t n, int d, const double *__restrict__ pb,
                           const double *__restrict__ s4, const double *__restrict__ wsum,
                           const int *__restrict__ plan_ok, double *__restrict__ stats)
{
    if (threadIdx.x == 0) {
        stats[GHF_ST_N] = wsum ? *wsum : (double)n;
        stats[GHF_ST_STOP] = pb[GHF_CU_PB_STOP];
        stats[ghf_stats_len(d) + GHF_CU_INFO_PLAN] = plan_ok ? (double)*plan_ok : 0.0;
    }
    double *s6 = stats + ghf_stats_s6(d);
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        stats[GHF_ST_S4 + j] = s4 ? s4[j] : 0.0;
    /* mirror the lower triangle (row-major) onto the upper one */
    const int npair = d * d;
    for (int k = threadIdx.x; k < npair; k += blockDim.x) {
        const int a = k / d, b = k - a * d;
        if (b > a) s6[a * d + b] = s6[b * d + a];
    }
}

/* Element conversion at upload: as stored, or float32 widened and centred. */
__device__ __forceinline__ void put_x(double *dst, double v, const double *shift, int j)
{
    (void)shift;
    (void)j;
    *dst = v;
}
__device__ __forceinline__ void put_x(float *dst, float v, const double *shift, int j)
{
    (void)shift;
    (void)j;
    *dst = v;
}
__device__ __forceinline__ void put_x(double *dst, float v, const double *shift, int j)
{
    *dst = (double)v - shift[j];
}

template <typename TS, typename TD>
__global__ void k_transpose_in(const TS *__restrict__ src, int64_t m, int d, TD *__restrict__ xt,
                               const double *__restrict__ shift, int64_t n, int64_t r0)
{
    /* 32 x 32 tiles through shared memory: coalesced reads and writes */
    __shared__ TS tile[32][33];
    const int64_t i0 = (int64_t)blockIdx.x * 32;
    const int j0 = blockIdx.y * 32;
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        const int64_t i = i0 + k;
        const int j = j0 + threadIdx.x;
        if (i < m && j < d) tile[k][threadIdx.x] = src[i * d + j];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        const int j = j0 + k;
        const int64_t i = i0 + threadIdx.x;
        if (i < m && j < d) put_x(xt + (int64_t)j * n + r0 + i, tile[threadIdx.x][k], shift, j);
    }
}

/* part[j][grid]: column sums of xt. grid.y = column. */
template <typename T>
__global__ void k_colsum(const T *__restrict__ xt, const double *__restrict__ shift, int64_t n,
                         double *__restrict__ part)
{
    const int j = blockIdx.y;
    const int64_t off = (int64_t)j * n;
    double v = 0.0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        v += load_x(xt, off + i, shift, j);
    v = block_sum(v);
    if (threadIdx.x == 0) part[(int64_t)j * gridDim.x + blockIdx.x] = v;
}

/* Weighted EM: part[j][grid] = block sums of w x_j (j < d) and of w (j = d). grid.y = d + 1. */
template <typename T>
__global__ void k_wcolsum(const T *__restrict__ xt, const double *__restrict__ shift,
                          const double *__restrict__ wt, int64_t n, int d, double *__restrict__ part)
{
    const int j = blockIdx.y;
    const int64_t off = (int64_t)j * n;
    double v = 0.0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        v += j < d ? wt[i] * load_x(xt, off + i, shift, j) : wt[i];
    v = block_sum(v);
    if (threadIdx.x == 0) part[(int64_t)j * gridDim.x + blockIdx.x] = v;
}

/* out[j] = sum_g part[j][g], one block per entry, fixed order. */
__global__ void k_partsum(const double *__restrict__ part, int grid, double *__restrict__ out)
{
    const int j = blockIdx.x;
    double v = 0.0;
    for (int g = threadIdx.x; g < grid; g += blockDim.x) v += part[(int64_t)j * grid + g];
    v = block_sum(v);
    if (threadIdx.x == 0) out[j] = v;
}

/* out[j] = sum_g part[j][g] (one block per column), bound[1 + j] = out[j] / n. */
__global__ void k_colsum_reduce(const double *__restrict__ part, int grid, int64_t n,
                                double *__restrict__ out, double *__restrict__ bound)
{
    const int j = blockIdx.x;
    double v = 0.0;
    for (int g = threadIdx.x; g < grid; g += blockDim.x) v += part[(int64_t)j * grid + g];
    v = block_sum(v);
    if (threadIdx.x == 0) {
        out[j] = v;
        bound[1 + j] = n > 0 ? v / (double)n : 0.0;
    }
}

template <typename T>
__global__ void k_rowdist(const T *__restrict__ xt, const double *__restrict__ shift, int64_t n, int d,
                          const double *__restrict__ bound, double *__restrict__ part)
{
    double m = 0.0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double s = 0.0;
        for (int j = 0; j < d; j++) {
            const double t = load_x(xt, (int64_t)j * n + i, shift, j) - bound[1 + j];
            s += t * t;
        }
        if (isfinite(s)) m = fmax(m, s);
    }
    m = block_max(m);
    if (threadIdx.x == 0) part[blockIdx.x] = m;
}

__global__ void k_rowdist_reduce(const double *__restrict__ part, int grid, double *__restrict__ bound)
{
    double m = 0.0;
    for (int g = threadIdx.x; g < grid; g += blockDim.x) m = fmax(m, part[g]);
    m = block_max(m);
    if (threadIdx.x == 0) bound[0] = sqrt(m) * (1.0 + 1e-12);
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ double u01(uint64_t h) { return ((double)(h >> 11) + 0.5) * 0x1.0p-53; }

__device__ __forceinline__ double normal(uint64_t seed, uint64_t k)
{
    const uint64_t h1 = splitmix64(seed ^ (2 * k)), h2 = splitmix64(h1 ^ (2 * k + 1));
    return sqrt(-2.0 * log(u01(h1))) * cospi(2.0 * u01(h2));
}

template <typename T>
__global__ void k_generate(T *__restrict__ xt, int64_t n, int d, uint64_t seed)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint64_t base = (uint64_t)i * (uint64_t)(d + 1);
        const double y = exp(0.5 * normal(seed, base)); /* log-normal mixing */
        const double sy = sqrt(y);
        double prev = 0.0;
        for (int j = 0; j < d; j++) {
            const double g = normal(seed, base + 1 + (uint64_t)j);
            const double e = g + 0.4 * prev; /* some correlation between neighbours */
            prev = g;
            xt[(int64_t)j * n + i] = (T)(0.1 * (j % 7) + 0.05 * ((j % 3) - 1) * y + sy * e);
        }
    }
}

/* ------------------------------------------------------------------------
 * Launchers
 * ---------------------------------------------------------------------- */

static int blocks_for(int64_t work, int tpb, int cap)
{
    int64_t b = (work + tpb - 1) / tpb;
    if (b < 1) b = 1;
    if (b > cap) b = cap;
    return (int)b;
}

extern "C" int ghf__cu_grid(int64_t n, int sm_count)
{
    /* a few resident blocks per SM; never more blocks than row groups */
    const int cap = (sm_count > 0 ? sm_count : 1) * 8;
    return blocks_for(n, GHF_CU_TPB, cap);
}

extern "C" size_t ghf__cu_plan_bytes(void) { return sizeof(ghf_bessel_plan); }

extern "C" cudaError_t ghf__cu_transpose_in(const double *src, int64_t m, int d, double *xt,
                                            int64_t n, int64_t r0, cudaStream_t s)
{
    if (m <= 0 || d <= 0) return cudaSuccess;
    const dim3 grid((unsigned)((m + 31) / 32), (unsigned)((d + 31) / 32)), block(32, 8);
    k_transpose_in<double, double><<<grid, block, 0, s>>>(src, m, d, xt, (const double *)NULL, n, r0);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_transpose_in_f32(const float *src, int64_t m, int d, float *xt32,
                                                double *xt, const double *shift, int64_t n,
                                                int64_t r0, cudaStream_t s)
{
    if (m <= 0 || d <= 0) return cudaSuccess;
    const dim3 grid((unsigned)((m + 31) / 32), (unsigned)((d + 31) / 32)), block(32, 8);
    if (xt32)
        k_transpose_in<float, float><<<grid, block, 0, s>>>(src, m, d, xt32, shift, n, r0);
    else
        k_transpose_in<float, double><<<grid, block, 0, s>>>(src, m, d, xt, shift, n, r0);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_shard_summary(const double *xt, const float *xt32, const double *shift,
                                             int64_t n, int d, int grid, double *part, double *s4,
                                             double *bound, cudaStream_t s)
{
    if (n <= 0) {
        cudaError_t e = cudaMemsetAsync(s4, 0, sizeof(double) * (size_t)d, s);
        if (e == cudaSuccess) e = cudaMemsetAsync(bound, 0, sizeof(double) * (size_t)(d + 1), s);
        return e;
    }
    if (xt32)
        k_colsum<float><<<dim3((unsigned)grid, (unsigned)d), 256, 0, s>>>(xt32, shift, n, part);
    else
        k_colsum<double><<<dim3((unsigned)grid, (unsigned)d), 256, 0, s>>>(xt, shift, n, part);
    k_colsum_reduce<<<d, 256, 0, s>>>(part, grid, n, s4, bound);
    if (xt32)
        k_rowdist<float><<<grid, 256, 0, s>>>(xt32, shift, n, d, bound, part);
    else
        k_rowdist<double><<<grid, 256, 0, s>>>(xt, shift, n, d, bound, part);
    k_rowdist_reduce<<<1, 256, 0, s>>>(part, grid, bound);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_weighted_sums(const double *xt, const float *xt32, const double *shift,
                                             const double *wt, int64_t n, int d, int grid, double *part,
                                             double *out, cudaStream_t s)
{
    if (n <= 0) return cudaMemsetAsync(out, 0, sizeof(double) * (size_t)(d + 1), s);
    const dim3 g((unsigned)grid, (unsigned)(d + 1));
    if (xt32)
        k_wcolsum<float><<<g, 256, 0, s>>>(xt32, shift, wt, n, d, part);
    else
        k_wcolsum<double><<<g, 256, 0, s>>>(xt, shift, wt, n, d, part);
    k_partsum<<<d + 1, 256, 0, s>>>(part, grid, out);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_generate(double *xt, float *xt32, int64_t n, int d, uint64_t seed,
                                        cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    if (xt32)
        k_generate<float><<<blocks_for(n, 256, 65536), 256, 0, s>>>(xt32, n, d, seed);
    else
        k_generate<double><<<blocks_for(n, 256, 65536), 256, 0, s>>>(xt, n, d, seed);
    return cudaGetLastError();
}

static_assert(GHF_CUDA_FUSED_DMAX == 12, "GHF_CU_DISPATCH below covers d = 1..12");

#define GHF_CU_DISPATCH(D_, CALL) \
    switch (D_) {                 \
    case 1: CALL(1); break;       \
    case 2: CALL(2); break;       \
    case 3: CALL(3); break;       \
    case 4: CALL(4); break;       \
    case 5: CALL(5); break;       \
    case 6: CALL(6); break;       \
    case 7: CALL(7); break;       \
    case 8: CALL(8); break;       \
    case 9: CALL(9); break;       \
    case 10: CALL(10); break;     \
    case 11: CALL(11); break;     \
    case 12: CALL(12); break;     \
    default: return cudaErrorInvalidValue; \
    }

extern "C" cudaError_t ghf__cu_qmax_fused(const double *xt, const float *xt32, int64_t n, int d,
                                          const double *pb, int grid, double *qpart, cudaStream_t s)
{
#define QMAX_CALL(D)                                                               \
    do {                                                                           \
        if (xt32)                                                                  \
            k_qmax_fused<D, float><<<grid, GHF_CU_TPB, 0, s>>>(xt32, n, pb, qpart);  \
        else                                                                       \
            k_qmax_fused<D, double><<<grid, GHF_CU_TPB, 0, s>>>(xt, n, pb, qpart);   \
    } while (0)
    GHF_CU_DISPATCH(d, QMAX_CALL)
#undef QMAX_CALL
    return cudaGetLastError();
}

extern "C" int ghf__cu_default_mma(int d)
{
    /* measured on an H200 (N = 1e8): tensor-core sums 4.9 ms vs 6.0 ms in
     * registers at d = 10; registers (4 blocks/SM) 2.6 ms vs 3.2 ms at d = 3.
     * Tensor cores from d = 7, where the register kernel drops to 2 blocks/SM
     * to avoid spills. */
    return d >= 7;
}

/* the most resident blocks whose register budget the kernel fits without
 * spilling (ptxas -v, sm_90) */
static constexpr int default_minb(int d) { return d <= 3 ? 4 : d <= 6 ? 3 : 2; }

extern "C" int ghf__cu_default_minb(int d) { return default_minb(d); }

extern "C" cudaError_t ghf__cu_estep_fused(const double *xt, const float *xt32, const double *wt,
                                           int64_t n, int d, const double *pb, const void *plan,
                                           const int *plan_ok, int grid, int minb, int mma,
                                           double *part, cudaStream_t s)
{
    const ghf_bessel_plan *pl = (const ghf_bessel_plan *)plan;
    if (mma < 0) mma = ghf__cu_default_mma(d);
    if (minb <= 0) minb = ghf__cu_default_minb(d);
    /* float32: the tensor-core kernel or the register kernel at its default
     * occupancy (the minb override is a float64 tuning knob: fewer instances) */
#define ESTEP_CALL(D)                                                                                  \
    do {                                                                                               \
        if (xt32 && mma)                                                                               \
            k_estep_mma<D, 4, float><<<grid, GHF_CU_TPB, 0, s>>>(xt32, wt, n, pb, pl, plan_ok, part);  \
        else if (xt32)                                                                                 \
            k_estep_fused<D, default_minb(D), float>                                                   \
                <<<grid, GHF_CU_TPB, 0, s>>>(xt32, wt, n, pb, pl, plan_ok, part);                      \
        else if (mma)                                                                                  \
            k_estep_mma<D, 4, double><<<grid, GHF_CU_TPB, 0, s>>>(xt, wt, n, pb, pl, plan_ok, part);   \
        else if (minb >= 4)                                                                            \
            k_estep_fused<D, 4, double><<<grid, GHF_CU_TPB, 0, s>>>(xt, wt, n, pb, pl, plan_ok, part); \
        else if (minb == 3)                                                                            \
            k_estep_fused<D, 3, double><<<grid, GHF_CU_TPB, 0, s>>>(xt, wt, n, pb, pl, plan_ok, part); \
        else                                                                                           \
            k_estep_fused<D, 2, double><<<grid, GHF_CU_TPB, 0, s>>>(xt, wt, n, pb, pl, plan_ok, part); \
    } while (0)
    GHF_CU_DISPATCH(d, ESTEP_CALL)
#undef ESTEP_CALL
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_reduce(const double *part, int ne, int grid, int d, double *stats,
                                      cudaStream_t s)
{
    k_reduce<<<ne, 256, 0, s>>>(part, grid, d, stats);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_pb_to_const(const double *pb, int d, cudaStream_t s)
{
    if (d < 1 || d > GHF_CUDA_FUSED_DMAX) return cudaErrorInvalidValue;
    return cudaMemcpyToSymbolAsync(c_pb, pb, sizeof(double) * (size_t)ghf__cu_pb_len(d), 0,
                                   cudaMemcpyDeviceToDevice, s);
}

extern "C" cudaError_t ghf__cu_sum_s6(const double *part, int nparts, int d, double *stats,
                                      cudaStream_t s)
{
    if (nparts <= 0) return cudaSuccess;
    k_sum_s6<<<blocks_for((int64_t)d * d, 256, 4096), 256, 0, s>>>(part, nparts, d, stats);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_center(const double *xt, int64_t n, int64_t r0, int64_t m, int d,
                                      const double *pb, double *zc, cudaStream_t s)
{
    k_center<<<blocks_for(m * d, 256, 65536), 256, 0, s>>>(xt, n, r0, m, d, pb, zc);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_qzw(const double *zc, int64_t m, int d, const double *pb, double *q,
                                   double *zw, cudaStream_t s)
{
    k_qzw<<<blocks_for(m, 256, 65536), 256, 0, s>>>(zc, m, d, pb, q, zw);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_qmax_arr(const double *q, int64_t n, int grid, double *qpart,
                                        cudaStream_t s)
{
    k_qmax_arr<<<grid, 256, 0, s>>>(q, n, qpart);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_estep_rows(const double *q, const double *zw, const double *wt,
                                          int64_t n, const double *pb, const void *plan,
                                          const int *plan_ok, int grid, double *u, double *part,
                                          cudaStream_t s)
{
    k_estep_rows<<<grid, GHF_CU_TPB, 0, s>>>(q, zw, wt, n, pb, (const ghf_bessel_plan *)plan, plan_ok, u,
                                             part);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_plan_build(const double *pb, int d, int mode, const double *qpart,
                                          int grid, int64_t n, const double *bound, void *plan,
                                          int *plan_ok, cudaStream_t s)
{
    ghf_bessel_plan *pl = (ghf_bessel_plan *)plan;
    k_plan_setup<<<1, 256, 0, s>>>(pb, d, mode, qpart, grid, n, bound, pl, plan_ok);
    /* nodes: one fused evaluation each, in parallel; pieces: one per thread */
    k_plan_nodes<<<64, 64, 0, s>>>(pl, plan_ok);
    k_plan_pieces<<<2, 64, 0, s>>>(pl, plan_ok);
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_finalize(int64_t n, int d, const double *pb, const double *s4,
                                        const double *wsum, const int *plan_ok, double *stats,
                                        cudaStream_t s)
{
    k_finalize<<<1, 256, 0, s>>>(n, d, pb, s4, wsum, plan_ok, stats);
    return cudaGetLastError();
}
