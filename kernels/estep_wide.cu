/* estep_wide.cu - the fused E-step for GHF_CUDA_FUSED_DMAX < d <= GHF_CUDA_WIDE_DMAX:
 * one pass over the shard per iteration, the quadratic forms and the sums
 * s6 = X^T diag(u) X on the FP64 tensor cores (mma.m8n8k4, sm_80 and newer).
 *
 * A block (GHF_CU_WIDE_TPB = 256 threads, 8 warps) takes tiles of
 * GHF_CU_WIDE_ROWS = 64 rows, grid-stride.  Per tile:
 *   A  load: the tile's x (widened and centred when the shard is float32)
 *      into shared memory, coalesced along the rows of each column;
 *   B  quadratic forms: warp w forms Z = (X - mu) L^-T for rows 8w .. 8w+7
 *      (8 x 8 output tiles; only the k-tiles at or left of the diagonal of
 *      the lower-triangular L^-1), then q = |z|^2 and zw = z.w from its
 *      accumulators, summed over the 4 lanes of a row in a fixed order;
 *   C  posterior moments: threads 0..63 (two full warps) take one row each,
 *      exactly as the other paths (row_point, add_row), and store u;
 *   D  sums: thread j < d adds sum_i u_i x_ij to s5_j; the 8 x 8 tiles of the
 *      lower triangle of s6 are dealt to the warps in row-major order, and
 *      each warp adds X^T diag(u) X for its tiles, 4 rows per mma.
 * L^-1 is kept in shared memory in fragment order (each lane's B operand is
 * one conflict-free load); mu, w and the float32 shift too.  No partial sums
 * are shared between warps: every s6 entry, every s5 entry and the scalars
 * have one owner, which writes the block's partial straight to
 * part[entry][block] (the fused layout, so ghf__cu_reduce finishes them).
 *
 * Determinism: fixed tile order per block, fixed mma and lane order, a
 * fixed-order reduction over the grid (fixed for a fit).  The range pass
 * (k_qmax_wide, the exact z-range) uses the same code for q as the E-step,
 * so both see the same bits.  Shared memory: wide_smem_doubles(NT) doubles
 * (143 KB at d = 128, within the 163 KB of sm_80 and 227 KB of sm_90). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "estep_device.cuh"

#define GHF_CU_WIDE_NW (GHF_CU_WIDE_TPB / 32)
#define GHF_CU_WIDE_ROWS (8 * GHF_CU_WIDE_NW)

/* Resident blocks per SM the E-step kernel's registers must allow: 2 where
 * that costs no spills (ptxas -v, sm_90: NT <= 8 needs at most 128 registers
 * without spilling), else 1 (up to 255 registers, no spills). */
static constexpr int wide_minb(int nt) { return nt <= 8 ? 2 : 1; }

static_assert(GHF_CU_WIDE_ROWS == 64, "phase C gives one row to each of the first 64 threads");
static_assert(GHF_CU_WIDE_TPB >= GHF_CUDA_WIDE_DMAX, "phase D gives one s5 column to each of the first d threads");

/* Doubles of shared memory per block for NT tiles per side (wide_shape<NT>::LEN). */
static constexpr int wide_len(int nt)
{
    return GHF_CU_WIDE_ROWS * (8 * nt + 4) + (nt * (nt + 1) / 2) * 65 + 3 * 8 * nt + 3 * GHF_CU_WIDE_ROWS +
           2 * GHF_CU_NSCAL;
}

/* Shared-memory layout (in doubles) for NT = ceil(d / 8) tiles per side. */
template <int NT> struct wide_shape {
    static constexpr int DP = 8 * NT;                     /* padded dimension */
    static constexpr int LDX = DP + 4;                    /* x row stride: conflict-free fragments */
    static constexpr int NLT = NT * (NT + 1) / 2;         /* 8 x 8 tiles of a lower triangle */
    static constexpr int TPW = (NLT + GHF_CU_WIDE_NW - 1) / GHF_CU_WIDE_NW; /* s6 tiles per warp */
    static constexpr int X = 0;                           /* [ROWS][LDX] the tile's x */
    static constexpr int L = X + GHF_CU_WIDE_ROWS * LDX;  /* [NLT][64] L^-1 tiles, fragment order */
    static constexpr int MU = L + NLT * 64;               /* [DP] mu, zero-padded */
    static constexpr int W = MU + DP;                     /* [DP] w, zero-padded */
    static constexpr int SH = W + DP;                     /* [DP] float32 centring */
    static constexpr int Q = SH + DP;                     /* [ROWS] q of the tile's rows */
    static constexpr int ZW = Q + GHF_CU_WIDE_ROWS;       /* [ROWS] zw */
    static constexpr int U = ZW + GHF_CU_WIDE_ROWS;       /* [ROWS] (weighted) u */
    static constexpr int RED = U + GHF_CU_WIDE_ROWS;      /* [2][NSCAL] scalar sums of warps 0, 1 */
    static constexpr int TILE = RED + 2 * GHF_CU_NSCAL;   /* int2 [NLT]: (8 t0, 8 t1) of s6 tile t */
    static constexpr int LEN = TILE + NLT;
    static_assert(LEN == wide_len(NT), "wide_len() must match the layout");
};

/* Row-major index of the lower-triangle tile row holding linear tile t. */
__device__ __forceinline__ int tri_row(int t)
{
    int r = 0;
    while ((r + 1) * (r + 2) / 2 <= t) r++;
    return r;
}

/* Once per block: L^-1 (lower triangle only: the parameter block's upper
 * entries are not read), mu, w, shift and the s6 tile table into shared
 * memory; the x tile zeroed, so its padding columns stay zero.  B operand of
 * Z-tile (ct, kt), k-step h, lane (g, t): L^-1[8 ct + g][8 kt + 4 h + t]. */
template <int NT>
__device__ void wide_setup(const double *__restrict__ pb, int d, double *sm)
{
    using S = wide_shape<NT>;
    const double *mu = pb + ghf__cu_pb_mu(d), *w = pb + ghf__cu_pb_w(d);
    const double *linv = pb + ghf__cu_pb_linv(d), *shift = pb + ghf__cu_pb_shift(d);
    for (int e = threadIdx.x; e < S::NLT * 64; e += blockDim.x) {
        const int t = e >> 6, f = e & 63, h = f >> 5, lane = f & 31;
        const int ct = tri_row(t), kt = t - ct * (ct + 1) / 2;
        const int a = 8 * ct + (lane >> 2), k = 8 * kt + 4 * h + (lane & 3);
        sm[S::L + e] = (a < d && k <= a) ? linv[a * d + k] : 0.0;
    }
    for (int j = threadIdx.x; j < S::DP; j += blockDim.x) {
        sm[S::MU + j] = j < d ? mu[j] : 0.0;
        sm[S::W + j] = j < d ? w[j] : 0.0;
        sm[S::SH + j] = j < d ? shift[j] : 0.0;
    }
    for (int e = threadIdx.x; e < GHF_CU_WIDE_ROWS * S::LDX; e += blockDim.x) sm[S::X + e] = 0.0;
    int2 *tile = (int2 *)(sm + S::TILE);
    for (int t = threadIdx.x; t < S::NLT; t += blockDim.x) {
        const int t0 = tri_row(t);
        tile[t] = make_int2(8 * t0, 8 * (t - t0 * (t0 + 1) / 2));
    }
    __syncthreads();
}

/* Phase A: rows base .. base+63 of the shard into the x tile (rows past n
 * as zeros).  Thread tid reads row tid % 64 of columns tid / 64 + 4 m (a warp:
 * 32 consecutive rows of one column, coalesced), WIDE_LB loads in flight per
 * thread before their stores (one block per SM above NT = 8: one load at a
 * time would leave the memory system idle). */
#define GHF_CU_WIDE_LB 8
template <int NT, typename T>
__device__ __forceinline__ void wide_load(const T *__restrict__ xt, int64_t n, int d, int64_t base, double *sm)
{
    using S = wide_shape<NT>;
    constexpr int CS = GHF_CU_WIDE_TPB / GHF_CU_WIDE_ROWS; /* column stride: 4 */
    static_assert(GHF_CU_WIDE_TPB % GHF_CU_WIDE_ROWS == 0, "whole columns per pass");
    const double *shift = sm + S::SH;
    const int i = threadIdx.x % GHF_CU_WIDE_ROWS, j0 = threadIdx.x / GHF_CU_WIDE_ROWS;
    const int64_t r = base + i;
    double *dst = sm + S::X + i * S::LDX;
    const bool in = r < n;
    for (int jb = j0; jb < d; jb += CS * GHF_CU_WIDE_LB) {
        double v[GHF_CU_WIDE_LB];
#pragma unroll
        for (int k = 0; k < GHF_CU_WIDE_LB; k++) {
            const int j = jb + CS * k;
            v[k] = (in && j < d) ? load_x(xt, (int64_t)j * n + r, shift, j) : 0.0;
        }
#pragma unroll
        for (int k = 0; k < GHF_CU_WIDE_LB; k++) {
            const int j = jb + CS * k;
            if (j < d) dst[j] = v[k];
        }
    }
}

/* Phase B: q and zw of row 8 w + g of the tile (w: this warp; every lane of
 * the row's group gets them).  The same bits in the range pass and the
 * E-step. */
template <int NT>
__device__ __forceinline__ void wide_qzw(const double *sm, double &q, double &zw)
{
    using S = wide_shape<NT>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const double *xr = sm + S::X + (8 * warp + g) * S::LDX, *mu = sm + S::MU, *sl = sm + S::L;
    double z[NT][2];
#pragma unroll
    for (int ct = 0; ct < NT; ct++) z[ct][0] = z[ct][1] = 0.0;
#pragma unroll
    for (int kt = 0; kt < NT; kt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int k = 8 * kt + 4 * h + t;
            const double a = xr[k] - mu[k];
#pragma unroll
            for (int ct = kt; ct < NT; ct++) mma_f64(z[ct], a, sl[(ct * (ct + 1) / 2 + kt) * 64 + h * 32 + lane]);
        }
    /* lane holds z[8 ct + 2 t + {0, 1}] of its row */
    const double *w = sm + S::W;
    double qq = 0.0, zz = 0.0;
#pragma unroll
    for (int ct = 0; ct < NT; ct++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            qq = fma(z[ct][hh], z[ct][hh], qq);
            zz = fma(z[ct][hh], w[8 * ct + 2 * t + hh], zz);
        }
    qq += __shfl_xor_sync(GHF_CU_FULL, qq, 1);
    zz += __shfl_xor_sync(GHF_CU_FULL, zz, 1);
    qq += __shfl_xor_sync(GHF_CU_FULL, qq, 2);
    zz += __shfl_xor_sync(GHF_CU_FULL, zz, 2);
    q = qq;
    zw = zz;
}

/* max q over the shard (block partials): the exact z-range. */
template <int NT, typename T>
__global__ void __launch_bounds__(GHF_CU_WIDE_TPB, 1)
    k_qmax_wide(const T *__restrict__ xt, int64_t n, int d, const double *__restrict__ pb, double *__restrict__ qpart)
{
    extern __shared__ double sm[];
    wide_setup<NT>(pb, d, sm);
    const int row = 8 * (threadIdx.x >> 5) + ((threadIdx.x & 31) >> 2);
    double m = 0.0;
    for (int64_t base = (int64_t)blockIdx.x * GHF_CU_WIDE_ROWS; base < n;
         base += (int64_t)gridDim.x * GHF_CU_WIDE_ROWS) {
        __syncthreads();
        wide_load<NT>(xt, n, d, base, sm);
        __syncthreads();
        double q, zw;
        wide_qzw<NT>(sm, q, zw);
        if (base + row < n && isfinite(q)) m = fmax(m, q);
    }
    m = block_max(m);
    if (threadIdx.x == 0) qpart[blockIdx.x] = m;
}

/* The E-step pass: partial sums of every entry of the fused layout
 * (ghf__cu_fused_entries(d)) into part[entry][block]. */
template <int NT, typename T>
__global__ void __launch_bounds__(GHF_CU_WIDE_TPB, wide_minb(NT))
    k_estep_wide(const T *__restrict__ xt, const double *__restrict__ wt, int64_t n, int d,
                 const double *__restrict__ pb, const ghf_bessel_plan *__restrict__ plan,
                 const int *__restrict__ plan_ok, double *__restrict__ part)
{
    using S = wide_shape<NT>;
    extern __shared__ double sm[];
    wide_setup<NT>(pb, d, sm);
    const ghf_estep_consts c = load_consts(pb);
    const int use_plan = plan_ok ? *plan_ok : 0;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int2 *tile = (const int2 *)(sm + S::TILE);
    const int tbeg = warp * S::TPW;

    double acc[GHF_CU_NSCAL];
#pragma unroll
    for (int e = 0; e < GHF_CU_NSCAL; e++) acc[e] = 0.0;
    double acc5 = 0.0;
    double cf[S::TPW][2];
#pragma unroll
    for (int k = 0; k < S::TPW; k++) cf[k][0] = cf[k][1] = 0.0;

    for (int64_t base = (int64_t)blockIdx.x * GHF_CU_WIDE_ROWS; base < n;
         base += (int64_t)gridDim.x * GHF_CU_WIDE_ROWS) {
        __syncthreads(); /* the previous tile's phase D is done with x and u */
        wide_load<NT>(xt, n, d, base, sm);
        __syncthreads();
        {
            double q, zw;
            wide_qzw<NT>(sm, q, zw);
            if (t == 0) {
                sm[S::Q + 8 * warp + g] = q;
                sm[S::ZW + 8 * warp + g] = zw;
            }
        }
        __syncthreads();
        if (tid < GHF_CU_WIDE_ROWS) {
            const int64_t r = base + tid;
            double u = 0.0;
            if (r < n) {
                const double q = sm[S::Q + tid], zw = sm[S::ZW + tid];
                u = add_row(acc, row_point(c, q, zw, plan, use_plan), zw, wt, r);
            }
            sm[S::U + tid] = u;
        }
        __syncthreads();
        const double *sx = sm + S::X, *su = sm + S::U;
        if (tid < d) {
            double v = acc5;
            for (int i = 0; i < GHF_CU_WIDE_ROWS; i++) v = fma(su[i], sx[i * S::LDX + tid], v);
            acc5 = v;
        }
        __syncwarp(); /* the s5 lanes rejoin before the warp-wide mma */
        /* s6 tile (t0, t1) += X^T diag(u) X: A[m][k] = x[k][8 t0 + m], B[k][n] = u_k x[k][8 t1 + n] */
#pragma unroll 2
        for (int ks = 0; ks < GHF_CU_WIDE_ROWS / 4; ks++) {
            const int row = 4 * ks + t;
            const double ur = su[row];
            const double *xr = sx + row * S::LDX + g;
#pragma unroll
            for (int k = 0; k < S::TPW; k++) {
                if (tbeg + k < S::NLT) { /* warp-uniform */
                    const int2 o = tile[tbeg + k];
                    mma_f64(cf[k], xr[o.x], ur * xr[o.y]);
                }
            }
        }
    }

    /* partials: scalars (threads 0..63 = warps 0, 1), s5 (thread j), s6 (one lane per entry) */
    const int grid = gridDim.x;
    if (warp < 2) {
#pragma unroll
        for (int e = 0; e < GHF_CU_NSCAL; e++) {
            const double v = warp_sum(acc[e]);
            if (lane == 0) sm[S::RED + warp * GHF_CU_NSCAL + e] = v;
        }
    }
    __syncthreads();
    if (tid < GHF_CU_NSCAL)
        part[(int64_t)tid * grid + blockIdx.x] = sm[S::RED + tid] + sm[S::RED + GHF_CU_NSCAL + tid];
    if (tid < d) part[(int64_t)(GHF_CU_NSCAL + tid) * grid + blockIdx.x] = acc5;
#pragma unroll
    for (int k = 0; k < S::TPW; k++) {
        if (tbeg + k >= S::NLT) continue;
        const int2 o = tile[tbeg + k];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int m = o.x + g, col = o.y + 2 * t + h;
            if (m < d && col <= m)
                part[(int64_t)(GHF_CU_NSCAL + d + m * (m + 1) / 2 + col) * grid + blockIdx.x] = cf[k][h];
        }
    }
}

/* ------------------------------------------------------------------------
 * Launchers
 * ---------------------------------------------------------------------- */

static_assert(GHF_CUDA_WIDE_DMAX == 128, "GHF_CU_WIDE_DISPATCH below covers NT = 2..16");

#define GHF_CU_WIDE_DISPATCH(NT_, CALL) \
    switch (NT_) {                      \
    case 2: CALL(2); break;             \
    case 3: CALL(3); break;             \
    case 4: CALL(4); break;             \
    case 5: CALL(5); break;             \
    case 6: CALL(6); break;             \
    case 7: CALL(7); break;             \
    case 8: CALL(8); break;             \
    case 9: CALL(9); break;             \
    case 10: CALL(10); break;           \
    case 11: CALL(11); break;           \
    case 12: CALL(12); break;           \
    case 13: CALL(13); break;           \
    case 14: CALL(14); break;           \
    case 15: CALL(15); break;           \
    case 16: CALL(16); break;           \
    default: return cudaErrorInvalidValue; \
    }

static int wide_nt(int d) { return (d + 7) / 8; }

extern "C" size_t ghf__cu_wide_smem(int d)
{
    if (d <= GHF_CUDA_FUSED_DMAX || d > GHF_CUDA_WIDE_DMAX) return 0;
    return (size_t)wide_len(wide_nt(d)) * sizeof(double);
}

/* The dynamic shared memory limit of kernel k raised to bytes, if its static
 * shared memory (k_qmax_wide: block_max's) fits beside it under optin. */
template <typename K> static cudaError_t wide_smem_limit(K k, size_t bytes, int optin)
{
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, k);
    if (e != cudaSuccess) return e;
    if (bytes + fa.sharedSizeBytes > (size_t)optin) return cudaErrorInvalidValue;
    return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

extern "C" cudaError_t ghf__cu_wide_prepare(int d, int optin)
{
    const size_t bytes = ghf__cu_wide_smem(d);
    if (bytes == 0 || bytes > (size_t)optin) return cudaErrorInvalidValue;
    cudaError_t e = cudaSuccess;
#define PREP_CALL(NT)                                                                     \
    do {                                                                                  \
        if (e == cudaSuccess) e = wide_smem_limit(k_estep_wide<NT, double>, bytes, optin); \
        if (e == cudaSuccess) e = wide_smem_limit(k_estep_wide<NT, float>, bytes, optin);  \
        if (e == cudaSuccess) e = wide_smem_limit(k_qmax_wide<NT, double>, bytes, optin);  \
        if (e == cudaSuccess) e = wide_smem_limit(k_qmax_wide<NT, float>, bytes, optin);   \
    } while (0)
    GHF_CU_WIDE_DISPATCH(wide_nt(d), PREP_CALL)
#undef PREP_CALL
    return e;
}

extern "C" cudaError_t ghf__cu_qmax_wide(const double *xt, const float *xt32, int64_t n, int d, const double *pb,
                                         int grid, double *qpart, cudaStream_t s)
{
    const size_t bytes = ghf__cu_wide_smem(d);
#define QMAX_CALL(NT)                                                                                       \
    do {                                                                                                    \
        if (xt32)                                                                                           \
            k_qmax_wide<NT, float><<<grid, GHF_CU_WIDE_TPB, bytes, s>>>(xt32, n, d, pb, qpart);             \
        else                                                                                                \
            k_qmax_wide<NT, double><<<grid, GHF_CU_WIDE_TPB, bytes, s>>>(xt, n, d, pb, qpart);              \
    } while (0)
    GHF_CU_WIDE_DISPATCH(wide_nt(d), QMAX_CALL)
#undef QMAX_CALL
    return cudaGetLastError();
}

extern "C" cudaError_t ghf__cu_estep_wide(const double *xt, const float *xt32, const double *wt, int64_t n, int d,
                                          const double *pb, const void *plan, const int *plan_ok, int grid,
                                          double *part, cudaStream_t s)
{
    const ghf_bessel_plan *pl = (const ghf_bessel_plan *)plan;
    const size_t bytes = ghf__cu_wide_smem(d);
#define ESTEP_CALL(NT)                                                                                         \
    do {                                                                                                       \
        if (xt32)                                                                                              \
            k_estep_wide<NT, float><<<grid, GHF_CU_WIDE_TPB, bytes, s>>>(xt32, wt, n, d, pb, pl, plan_ok, part); \
        else                                                                                                   \
            k_estep_wide<NT, double><<<grid, GHF_CU_WIDE_TPB, bytes, s>>>(xt, wt, n, d, pb, pl, plan_ok, part);  \
    } while (0)
    GHF_CU_WIDE_DISPATCH(wide_nt(d), ESTEP_CALL)
#undef ESTEP_CALL
    return cudaGetLastError();
}
