/* test_xsum.c - the reproducible sums (kernels/xsum.h, src/dist/xreduce.c):
 *   - the same bits for any order of additions and any grouping into merged
 *     partial accumulators (threads, ranks);
 *   - accuracy against a long double reference on well-conditioned sums and
 *     against the exact sum (integers) under heavy cancellation;
 *   - zeros, subnormals, values near DBL_MAX, NaN and Inf;
 *   - under MPI: ghf_xsum_allreduce and ghf_xreduce_rows give the same bits
 *     as one process summing everything, for every rank count. */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "xreduce.h"
#include "xsum.h"

static uint64_t g_s = 88172645463325252ULL;
static uint64_t rnd(void)
{
    g_s ^= g_s << 13;
    g_s ^= g_s >> 7;
    g_s ^= g_s << 17;
    return g_s;
}
static double urand(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }

static double sum_order(const double *x, int n, const int *perm)
{
    ghf_xsum a;
    ghf_xsum_init(&a);
    for (int i = 0; i < n; i++) ghf_xsum_add(&a, x[perm ? perm[i] : i]);
    return ghf_xsum_value(&a);
}

/* sum in random chunks, each its own accumulator, merged in random order */
static double sum_chunks(const double *x, int n)
{
    ghf_xsum parts[16];
    for (int k = 0; k < 16; k++) ghf_xsum_init(&parts[k]);
    for (int i = 0; i < n; i++) ghf_xsum_add(&parts[rnd() % 16], x[i]);
    ghf_xsum a;
    ghf_xsum_init(&a);
    int order[16];
    for (int k = 0; k < 16; k++) order[k] = k;
    for (int k = 15; k > 0; k--) {
        int j = (int)(rnd() % (uint64_t)(k + 1)), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < 16; k++) ghf_xsum_merge(&a, &parts[order[k]]);
    return ghf_xsum_value(&a);
}

static void shuffle(int *p, int n)
{
    for (int i = 0; i < n; i++) p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1)), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

static void test_orders(void)
{
    enum { N = 5000 };
    static double x[N];
    static int perm[N];
    for (int kind = 0; kind < 4; kind++) {
        for (int i = 0; i < N; i++) {
            const double s = (rnd() & 1) ? -1.0 : 1.0;
            if (kind == 0) x[i] = urand();                                 /* same sign */
            else if (kind == 1) x[i] = s * urand();                        /* mixed signs */
            else if (kind == 2) x[i] = s * ldexp(urand(), (int)(rnd() % 200) - 100); /* wide range */
            else x[i] = s * ldexp(1.0 + urand(), (int)(rnd() % 60));        /* cancelling large terms */
        }
        const double ref = sum_order(x, N, NULL);
        int same = 1;
        for (int t = 0; t < 20; t++) {
            shuffle(perm, N);
            same &= sum_order(x, N, perm) == ref;
            same &= sum_chunks(x, N) == ref;
        }
        CHECK(same, "kind %d: the sum depends on the order", kind);
        /* accuracy: long double with the terms sorted by magnitude */
        long double l = 0.0L;
        for (int i = 0; i < N; i++) l += (long double)x[i];
        double mx = 0.0;
        for (int i = 0; i < N; i++) mx = fmax(mx, fabs(x[i]));
        const double err = fabs((double)(l - (long double)ref));
        CHECK(err <= 4.0 * DBL_EPSILON * fabs(ref) + 1e-18 * mx * N, "kind %d: error %g (sum %g)", kind, err, ref);
    }
}

static void test_exact_cancellation(void)
{
    /* integers with huge cancellation: the exact sum is 7 */
    double x[] = {1e17, 3.0, -1e17, 4.0, 1e16, -1e16, 0.0, -0.0};
    int perm[8];
    for (int t = 0; t < 50; t++) {
        shuffle(perm, 8);
        CHECK(sum_order(x, 8, perm) == 7.0, "cancellation: %g", sum_order(x, 8, perm));
    }
    /* a value far below the largest one is dropped the same way in any order */
    double y[] = {1e300, 1.0, -1e300, 2.0};
    double r0 = sum_order(y, 4, NULL);
    for (int t = 0; t < 20; t++) {
        shuffle(perm, 4);
        CHECK(sum_order(y, 4, perm) == r0, "far below the top: %g vs %g", sum_order(y, 4, perm), r0);
    }
}

static void test_special(void)
{
    double sub[] = {DBL_TRUE_MIN, 3 * DBL_TRUE_MIN, -DBL_TRUE_MIN, 0x1p-1060};
    CHECK(sum_order(sub, 4, NULL) == 3 * DBL_TRUE_MIN + 0x1p-1060, "subnormals: %a", sum_order(sub, 4, NULL));
    double big[] = {DBL_MAX, -DBL_MAX, DBL_MAX / 2};
    CHECK(sum_order(big, 3, NULL) == DBL_MAX / 2, "near DBL_MAX: %g", sum_order(big, 3, NULL));
    double nan[] = {1.0, NAN, 2.0};
    CHECK(isnan(sum_order(nan, 3, NULL)), "NaN propagates");
    double inf[] = {1.0, INFINITY};
    CHECK(isnan(sum_order(inf, 2, NULL)), "Inf gives NaN");
    ghf_xsum e;
    ghf_xsum_init(&e);
    CHECK(ghf_xsum_value(&e) == 0.0, "empty sum");
}

/* one block's partial: column sums and the sum of squares of column 0 */
static void block_fn(void *ctx, const double *x, int nb, int d, double *part)
{
    (void)ctx;
    for (int i = 0; i < nb; i++) {
        for (int j = 0; j < d; j++) part[j] += x[i * d + j];
        part[d] += x[i * d] * x[i * d];
    }
}

static void test_mpi(MPI_Comm comm)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const int d = 3;
    const int64_t n = 10 * GHF_ROW_BLOCK + 77;
    double *all = malloc((size_t)n * d * sizeof(double));
    g_s = 12345;
    for (int64_t i = 0; i < n * d; i++) all[i] = ldexp(urand() - 0.3, (int)(rnd() % 40) - 20);
    /* the whole data on one process, in row order */
    double ref[4];
    ghf_xreduce_rows(MPI_COMM_SELF, all, n, d, d + 1, block_fn, NULL, ref);
    /* this rank's whole blocks */
    const int64_t nb = (n + GHF_ROW_BLOCK - 1) / GHF_ROW_BLOCK;
    const int64_t b0 = nb * rank / size, b1 = nb * (rank + 1) / size;
    int64_t r0 = b0 * GHF_ROW_BLOCK, r1 = b1 * GHF_ROW_BLOCK;
    if (r1 > n) r1 = n;
    double got[4];
    ghf_xreduce_rows(comm, all + r0 * d, r1 - r0, d, d + 1, block_fn, NULL, got);
    CHECK(memcmp(got, ref, sizeof ref) == 0, "np=%d: distributed sums differ from one process's (%.17g vs %.17g)", size,
          got[0], ref[0]);
    free(all);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        test_orders();
        test_exact_cancellation();
        test_special();
    }
    test_mpi(MPI_COMM_WORLD);
    int f = g_fails, all = 0;
    MPI_Allreduce(&f, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_xsum: %d checks, %d failure(s) over all ranks\n", g_checks, all);
    MPI_Finalize();
    return all != 0;
}
