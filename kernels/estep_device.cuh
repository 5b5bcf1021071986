/* estep_device.cuh - device helpers shared by the CUDA E-step kernels
 * (estep_kernels.cu: fused path for small d, cuBLAS path, plan, one-time
 * kernels; estep_wide.cu: the fused tensor-core path for larger d): the
 * parameter block's scalars, one row's posterior moments and its share of the
 * scalar sums (plain or weighted), fixed-order warp and block reductions, the
 * element loads of a float64 or float32 shard, and the FP64 tensor-core
 * multiply-add.  Included by .cu files only (whole-program compilation: each
 * translation unit gets its own copy). */
#ifndef GHF_ESTEP_DEVICE_CUH
#define GHF_ESTEP_DEVICE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "bessel_plan.h"
#include "estep.h"
#include "estep_cuda.h"

#define GHF_CU_FULL 0xffffffffu

__device__ __forceinline__ ghf_estep_consts load_consts(const double *pb)
{
    ghf_estep_consts c;
    c.P = pb[GHF_CU_PB_P];
    c.A = pb[GHF_CU_PB_A];
    c.b = pb[GHF_CU_PB_B];
    c.log_A = pb[GHF_CU_PB_LOGA];
    c.ll_const = pb[GHF_CU_PB_LLC];
    c.R = pb[GHF_CU_PB_R];
    c.p2 = pb[GHF_CU_PB_P2];
    c.a = pb[GHF_CU_PB_PA];
    c.w2 = pb[GHF_CU_PB_W2];
    return c;
}

/* Direct evaluation: compiled once, not inlined into every kernel. */
static __device__ __noinline__ ghf_bessel_eval bessel_direct(double v, double z)
{
    return ghf_bessel_fused(v, z);
}

__device__ __forceinline__ ghf_point row_point(const ghf_estep_consts &c, double q, double zw,
                                               const ghf_bessel_plan *plan, int use_plan)
{
    const double z = ghf_estep_arg(&c, q);
    ghf_bessel_eval bk;
    if (use_plan)
        bk = ghf_bessel_plan_eval(plan, z);
    else
        bk = bessel_direct(c.P, z);
    return ghf_estep_point(&c, q, zw, bk);
}

__device__ __forceinline__ bool point_ok(const ghf_point &r)
{
    return isfinite(r.u) && isfinite(r.v) && isfinite(r.l) && isfinite(r.ll);
}

/* A row's share of s1 s2 s3 ll nbad |zw| (acc[0..5]; a bad row adds 0 and
 * counts in nbad, as on the CPU); returns the row's u (0 for a bad row). */
template <int N>
__device__ __forceinline__ double add_point(double (&acc)[N], const ghf_point &r, double zw)
{
    const bool ok = point_ok(r);
    const double u = ok ? r.u : 0.0;
    acc[0] += u;
    acc[1] += ok ? r.v : 0.0;
    acc[2] += ok ? r.l : 0.0;
    acc[3] += ok ? r.ll : 0.0;
    acc[4] += ok ? 0.0 : 1.0;
    acc[5] += ok ? fabs(zw) : 0.0;
    return u;
}

/* Weighted EM: the row's u, v, l, log f and |zw| times its weight w (no
 * contraction with the sums: __dmul_rn, as the CPU multiplies first); a row
 * of weight 0 contributes exact zeros, even where its moments are not
 * finite.  Returns the row's weighted u (0 for a bad row). */
template <int N>
__device__ __forceinline__ double add_point_w(double (&acc)[N], ghf_point r, double zw, double w)
{
    if (w == 0.0) {
        r.u = r.v = r.l = r.ll = 0.0;
        zw = 0.0;
    } else {
        r.u = __dmul_rn(r.u, w);
        r.v = __dmul_rn(r.v, w);
        r.l = __dmul_rn(r.l, w);
        r.ll = __dmul_rn(r.ll, w);
        zw = __dmul_rn(zw, w);
    }
    return add_point(acc, r, zw);
}

/* The row's share of the scalar sums, weighted when wt is not NULL. */
template <int N>
__device__ __forceinline__ double add_row(double (&acc)[N], const ghf_point &r, double zw,
                                          const double *__restrict__ wt, int64_t i)
{
    return wt ? add_point_w(acc, r, zw, __ldg(wt + i)) : add_point(acc, r, zw);
}

__device__ __forceinline__ double warp_sum(double v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(GHF_CU_FULL, v, off);
    return v;
}

__device__ __forceinline__ double warp_max(double v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = fmax(v, __shfl_down_sync(GHF_CU_FULL, v, off));
    return v;
}

/* Block-wide max (MAX) or sum of v in a fixed order (all threads get it);
 * blockDim.x a multiple of 32, <= 1024. */
template <bool MAX>
static __device__ double block_reduce(double v)
{
    __shared__ double s[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = MAX ? warp_max(v) : warp_sum(v);
    __syncthreads();
    if (lane == 0) s[warp] = v;
    __syncthreads();
    double m = s[0];
    for (int w = 1; w < nw; w++) m = MAX ? fmax(m, s[w]) : m + s[w];
    return m;
}
static __device__ __forceinline__ double block_max(double v) { return block_reduce<true>(v); }
static __device__ __forceinline__ double block_sum(double v) { return block_reduce<false>(v); }

/* Per-block partials of the row kernels: each warp puts the warp sums of
 * its lanes' running sums acc[0..N-1] into its row of s_red (entries 0..N-1) ... */
template <int N, int NE>
__device__ __forceinline__ void warp_sums_to_shared(const double (&acc)[N],
                                                    double (&s_red)[GHF_CU_TPB / 32][NE])
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int e = 0; e < N; e++) {
        const double v = warp_sum(acc[e]);
        if (lane == 0) s_red[warp][e] = v;
    }
}

/* ... then the block's partial of each entry is the warps' rows summed in
 * warp order, written to part[e][blockIdx.x]. */
template <int NE>
__device__ __forceinline__ void write_block_partials(const double (&s_red)[GHF_CU_TPB / 32][NE],
                                                     double *__restrict__ part)
{
    __syncthreads();
    for (int e = threadIdx.x; e < NE; e += blockDim.x) {
        double v = s_red[0][e];
        for (int w = 1; w < GHF_CU_TPB / 32; w++) v += s_red[w][e];
        part[(int64_t)e * gridDim.x + blockIdx.x] = v;
    }
}

/* One element of the shard in the one-time kernels (shift in global memory). */
__device__ __forceinline__ double load_x(const double *__restrict__ xt, int64_t k, const double *shift, int j)
{
    (void)shift;
    (void)j;
    return xt[k];
}

__device__ __forceinline__ double load_x(const float *__restrict__ xt, int64_t k, const double *shift, int j)
{
    return (double)xt[k] - shift[j];
}

/* One 8 x 8 x 4 FP64 tensor-core multiply-add, c += A B, for the warp
 * (mma.m8n8k4, sm_80 and newer).  Fragments: lane (g = lane / 4, t = lane % 4)
 * supplies a = A[g][t] and b = B[t][g] and holds c = C[g][2t], C[g][2t + 1]. */
__device__ __forceinline__ void mma_f64(double (&c)[2], double a, double b)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
                 : "+d"(c[0]), "+d"(c[1])
                 : "d"(a), "d"(b));
#else
    (void)c;
    (void)a;
    (void)b;
    __trap(); /* never launched below sm_80 (the host checks) */
#endif
}

#endif /* GHF_ESTEP_DEVICE_CUH */
