/* bessel_nvcc.cu - compile-only check: the Bessel headers build under nvcc
 * and their functions can be called from a __global__ kernel. */
#include "bessel.h"
#include "bessel_plan.h"

__global__ void ghf_test_bessel_fused_kernel(const double *v, const double *z, ghf_bessel_eval *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = ghf_bessel_fused(v[i], z[i]);
}

__global__ void ghf_test_bessel_plan_nodes_kernel(ghf_bessel_plan *pl, int nnodes)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nnodes) ghf_bessel_plan_node(pl, i);
}

__global__ void ghf_test_bessel_plan_finish_kernel(ghf_bessel_plan *pl, int npieces)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < npieces) ghf_bessel_plan_finish_piece(pl, k);
}

__global__ void ghf_test_bessel_plan_eval_kernel(const ghf_bessel_plan *pl, const double *z, ghf_bessel_eval *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = ghf_bessel_plan_eval(pl, z[i]);
}

__global__ void ghf_test_bessel_scalar_kernel(const double *v, const double *z, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        ghf_bessel_plan pl;
        ghf_bessel_plan_build(&pl, v[i], z[i], 2.0 * z[i]);
        out[4 * i + 0] = ghf_log_kv(v[i], z[i]);
        out[4 * i + 1] = ghf_dlog_kv_dv(v[i], z[i]);
        out[4 * i + 2] = ghf_log_kv_ratio(v[i], z[i]);
        out[4 * i + 3] = ghf_bessel_plan_eval(&pl, z[i]).logk_s;
    }
}
