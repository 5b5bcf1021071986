/* test_psort.c - the parallel sort (src/dist/psort.c) and the distributed
 * goodness-of-fit pieces (src/pipeline/gofdist.c), on any number of ranks:
 *   - random keys with many ties and uneven shards (one rank may hold none):
 *     each rank's piece is sorted, the pieces follow each other in rank
 *     order, the offsets add up, and every global row comes back exactly
 *     once with its value;
 *   - ghf_gof_stats_dist on the sorted pieces has the same bits as
 *     ghf_gof_stats on the whole sorted sample (ties included);
 *   - ghf_gof_pit_dist gives the same bits as ghf_gof_pit_sorted on the whole
 *     sample, exact and interpolated (knots), and the same error estimate. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gofdist.h"
#include "psort.h"
#include "testutil.h"

/* a value per global row, independent of the rank count (splitmix64) */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* kind 0: 97 distinct values (ties everywhere; zeros of both signs); 1: u in
 * (0, 1) with ties; 2: continuous; 3: every sign and binade (subnormals,
 * +-0, near DBL_MAX, repeats) */
static double value(int kind, int64_t g)
{
    const uint64_t h = mix((uint64_t)g * 3 + (uint64_t)kind);
    if (kind == 0) return (h % 97) == 48 && (h >> 40) % 2 ? -0.0 : (double)(h % 97) - 48.0;
    if (kind == 3) {
        const double m = 1.0 + (double)((h >> 20) % 8) / 8.0; /* few mantissas: repeats */
        const double v = (h % 13 == 0) ? 0.0 : ldexp(m, (int)((h >> 8) % 2098) - 1074 - 1);
        return (h >> 63) ? -v : v;
    }
    if (kind == 1) return ((double)(h % 1000) + 0.5) / 1000.0;
    return (double)(h >> 11) * 0x1.0p-53 * 8.0 - 4.0;
}

/* uneven shards: rank r holds (r + 1) * n / tri rows, rank 1 none when P >= 3 */
static void shard(int64_t N, int rank, int P, int64_t *row0, int64_t *nloc)
{
    int64_t w = 0, before = 0;
    for (int r = 0; r < P; r++) w += (P >= 3 && r == 1) ? 0 : r + 1;
    int64_t acc = 0;
    for (int r = 0; r < P; r++) {
        const int64_t wr = (P >= 3 && r == 1) ? 0 : r + 1;
        const int64_t cnt = r == P - 1 ? N - acc : N * wr / w;
        if (r == rank) before = acc, *nloc = cnt;
        acc += cnt;
    }
    *row0 = before;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* sorts kind's values of N rows; returns the sorted piece */
static ghf_sortkey *sorted_piece(int kind, int64_t N, int64_t *m, int64_t *off)
{
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int64_t row0 = 0, nloc = 0, nall = 0;
    shard(N, rank, P, &row0, &nloc);
    ghf_sortkey *k = malloc((size_t)(nloc > 0 ? nloc : 1) * sizeof *k);
    for (int64_t i = 0; i < nloc; i++) k[i] = (ghf_sortkey){value(kind, row0 + i), row0 + i};
    char err[256] = "";
    const int st = ghf_psort(MPI_COMM_WORLD, &k, nloc, m, off, &nall, err, sizeof err);
    CHECK(st == 0 && nall == N, "psort: status %d, %lld of %lld keys: %s", st, (long long)nall, (long long)N, err);
    return k;
}

static void check_sort(int kind, int64_t N)
{
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int64_t m, off;
    ghf_sortkey *k = sorted_piece(kind, N, &m, &off);
    int sorted = 1;
    for (int64_t i = 1; i < m; i++) sorted &= ghf_sortkey_cmp(&k[i - 1], &k[i]) < 0;
    CHECK(sorted, "rank %d: piece not sorted", rank);
    /* every piece and its offset on rank 0: the global order, each row once */
    int mi = (int)m, *cnt = malloc((size_t)P * sizeof(int)), *dsp = malloc((size_t)P * sizeof(int));
    int64_t *offs = malloc((size_t)P * sizeof(int64_t));
    MPI_Gather(&mi, 1, MPI_INT, cnt, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(&off, 1, MPI_INT64_T, offs, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    ghf_sortkey *all = rank == 0 ? malloc((size_t)(N > 0 ? N : 1) * sizeof *all) : NULL;
    if (rank == 0) {
        dsp[0] = 0;
        for (int r = 1; r < P; r++) dsp[r] = dsp[r - 1] + cnt[r - 1];
        for (int r = 0; r < P; r++) CHECK(offs[r] == dsp[r], "rank %d: offset %lld, want %d", r, (long long)offs[r], dsp[r]);
        CHECK(dsp[P - 1] + cnt[P - 1] == N, "pieces hold %d keys, want %lld", dsp[P - 1] + cnt[P - 1], (long long)N);
        int64_t big = 0;
        for (int r = 0; r < P; r++) big = cnt[r] > big ? cnt[r] : big;
        CHECK(big <= 2 * N / P + 64, "largest piece %lld of %lld on %d ranks", (long long)big, (long long)N, P);
    }
    MPI_Datatype t;
    MPI_Type_contiguous((int)sizeof(ghf_sortkey), MPI_BYTE, &t);
    MPI_Type_commit(&t);
    MPI_Gatherv(k, mi, t, all, cnt, dsp, t, 0, MPI_COMM_WORLD);
    MPI_Type_free(&t);
    if (rank == 0) {
        char *seen = calloc((size_t)(N > 0 ? N : 1), 1);
        int ok = 1;
        for (int64_t i = 0; i < N; i++) {
            ok &= all[i].i >= 0 && all[i].i < N && !seen[all[i].i] && all[i].x == value(kind, all[i].i);
            if (all[i].i >= 0 && all[i].i < N) seen[all[i].i] = 1;
            if (i > 0) ok &= ghf_sortkey_cmp(&all[i - 1], &all[i]) < 0;
        }
        CHECK(ok, "kind %d, N %lld on %d ranks: not the global order of every row once", kind, (long long)N, P);
        free(seen);
    }
    free(all), free(cnt), free(dsp), free(offs), free(k);
}

/* rank 0: all N values of kind, sorted */
static double *serial_sorted(int kind, int64_t N)
{
    double *v = malloc((size_t)N * sizeof *v);
    for (int64_t i = 0; i < N; i++) v[i] = value(kind, i);
    qsort(v, (size_t)N, sizeof *v, cmp_d);
    return v;
}

static void check_stats(int64_t N)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int64_t m, off;
    ghf_sortkey *k = sorted_piece(1, N, &m, &off);
    double *u = malloc((size_t)(m > 0 ? m : 1) * sizeof *u);
    for (int64_t i = 0; i < m; i++) u[i] = k[i].x;
    ghf_gof_stat s, r;
    CHECK(ghf_gof_stats_dist(MPI_COMM_WORLD, u, (size_t)m, (size_t)off, (size_t)N, &s) == 0, "stats_dist failed");
    ghf_gof_stat s0 = s;
    MPI_Bcast(&s0, sizeof s0, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK(memcmp(&s, &s0, sizeof s) == 0, "rank %d: statistics differ from rank 0's", rank);
    if (rank == 0) {
        double *v = serial_sorted(1, N);
        ghf_gof_stats(v, (size_t)N, &r);
        CHECK(memcmp(&s, &r, sizeof s) == 0, "distributed statistics (%.17g %.17g %.17g) != serial (%.17g %.17g %.17g)",
              s.ks, s.ad, s.cvm, r.ks, r.ad, r.cvm);
        free(v);
    }
    free(u), free(k);
}

static int logistic(const void *ctx, double x, double *u)
{
    (void)ctx;
    *u = 1.0 / (1.0 + exp(-x));
    return 0;
}

static void check_pit(int kind, int64_t N, size_t nexact, size_t nknots)
{
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int64_t m, off;
    ghf_sortkey *k = sorted_piece(kind, N, &m, &off);
    double *xs = malloc((size_t)(m > 0 ? m : 1) * sizeof *xs), *u = malloc((size_t)(m > 0 ? m : 1) * sizeof *u);
    for (int64_t i = 0; i < m; i++) xs[i] = k[i].x;
    double err = -1.0;
    const int st = ghf_gof_pit_dist(MPI_COMM_WORLD, xs, (size_t)m, (size_t)off, (size_t)N, logistic, NULL, nexact,
                                    nknots, u, &err);
    CHECK(st == 0, "pit_dist failed");
    int mi = (int)m, *cnt = malloc((size_t)P * sizeof(int)), *dsp = malloc((size_t)P * sizeof(int));
    MPI_Gather(&mi, 1, MPI_INT, cnt, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double *ua = rank == 0 ? malloc((size_t)N * sizeof *ua) : NULL;
    if (rank == 0) {
        dsp[0] = 0;
        for (int r = 1; r < P; r++) dsp[r] = dsp[r - 1] + cnt[r - 1];
    }
    MPI_Gatherv(u, mi, MPI_DOUBLE, ua, cnt, dsp, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double *v = serial_sorted(kind, N), *w = malloc((size_t)N * sizeof *w), e0 = -2.0;
        CHECK(ghf_gof_pit_sorted(v, (size_t)N, logistic, NULL, nexact, nknots, w, &e0) == 0, "pit_sorted failed");
        CHECK(memcmp(w, ua, (size_t)N * sizeof *w) == 0 && memcmp(&e0, &err, sizeof err) == 0,
              "kind %d, N %lld, %zu knots: distributed PITs differ from the serial ones (error %g vs %g)", kind,
              (long long)N, nknots, err, e0);
        CHECK((nexact < (size_t)N || e0 == 0.0) && e0 < 1e-3, "kind %d: error estimate %g", kind, e0);
        free(v), free(w);
    }
    free(ua), free(cnt), free(dsp), free(xs), free(u), free(k);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const int64_t sizes[] = {0, 1, 2, 7, 1000, 20011};
    for (int kind = 0; kind < 4; kind++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) check_sort(kind, sizes[s]);
    check_stats(2);
    check_stats(20011);
    check_pit(2, 20011, 100000, 256); /* exact */
    check_pit(2, 20011, 100, 256);    /* knots and interpolation */
    check_pit(0, 20011, 100, 256);    /* 97 distinct values: fewer knots than asked */
    check_pit(1, 20011, 100, 16);
    int f = g_fails, all = 0;
    MPI_Allreduce(&f, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_psort: %d checks on %d rank(s), %d failure(s) over all ranks\n", g_checks, P, all);
    MPI_Finalize();
    return all != 0;
}
