/* test_cuda_estep.c - the CUDA E-step against the CPU backend and a serial
 * reference (GPU test: exits 77, "skipped", when there is no CUDA device).
 *
 * For d = 1, 3, 10, 13, 50, 64, 100, 128, 200 on random GH data with random
 * parameters:
 *   - CUDA statistics (graph + NCCL when np = 1, graph + MPI reduction
 *     otherwise) agree with the CPU backend to 1e-12, relative to the
 *     magnitude of each sum (sum of |terms|, from the serial reference), so
 *     that sums that cancel to ~0 are judged fairly;
 *   - the first (eager) call, graph replays, and a backend that never uses
 *     a graph give bitwise the same statistics; replays are repeatable;
 *   - a second parameter set through the same captured graph is right (the
 *     graph reads the staged parameters, not the captured values);
 *   - variants agree with the CPU too: direct Bessel evaluation, the bound
 *     z-range mode, the cuBLAS path forced at small d, several row chunks;
 *     for 12 < d <= 128 the wide fused tensor-core kernel (GHFIT_CUDA_WIDE=1)
 *     with the plan (bound and exact z-range) and with direct evaluation,
 *     row counts that leave a partial 64-row tile;
 *   - observation weights (some exactly 0): the CUDA statistics agree with
 *     the weighted CPU backend to 1e-12, replays are bitwise repeatable, and
 *     one call with be->weights = NULL (ghf_em_loglik_unweighted) gives the
 *     unweighted backend's statistics bitwise, the weighting back after it;
 *   - float32 storage (opts x32 + shift): the statistics of the float32 shard
 *     equal those of the float64 shard of the same centred numbers to 1e-12
 *     (bitwise expected: the kernels widen to the same doubles), on the fused
 *     and the cuBLAS path, and the wide kernel at 12 < d <= 128 (exact
 *     z-range), weighted too.
 * Run with any number of ranks; with np > 1 the last rank holds no rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "backend.h"
#include "cuda_opts.h"
#include "bessel.h"
#include "model.h"

static int g_fail = 0, g_rank = 0;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "[%d] FAIL %s:%d: ", g_rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
            g_fail++;                                                      \
        }                                                                  \
    } while (0)

/* ---- deterministic random numbers ---- */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static double rng_u01(uint64_t *s) { return ((double)(rng_next(s) >> 11) + 0.5) * 0x1.0p-53; }
static double rng_normal(uint64_t *s)
{
    const double u1 = rng_u01(s), u2 = rng_u01(s);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

typedef struct problem {
    int d;
    int64_t n_global, row0, nrows;
    double *x; /* this rank's rows */
    ghf_params prm;
    ghf_derived der;
    ghf_estep_input in;
} problem;

/* Random parameters around the data's law (p: GH order). */
static int make_params(problem *pb, uint64_t seed, double p)
{
    const int d = pb->d;
    uint64_t s = seed;
    ghf_params *t = &pb->prm;
    double *B = malloc(sizeof(double) * (size_t)d * (size_t)d);
    if (!B) return -1;
    for (int i = 0; i < d * d; i++) B[i] = rng_normal(&s);
    for (int i = 0; i < d; i++) {
        t->mu[i] = 0.1 * (i % 5) + 0.05 * rng_normal(&s);
        t->gamma[i] = 0.1 * rng_normal(&s);
        for (int j = 0; j <= i; j++) {
            double v = 0.0;
            for (int k = 0; k < d; k++) v += B[i * d + k] * B[j * d + k];
            v = 0.3 * v / d + (i == j ? 0.7 : 0.0);
            t->sigma[i * d + j] = t->sigma[j * d + i] = v;
        }
    }
    free(B);
    t->p = p;
    t->a = 1.1 + 0.2 * rng_u01(&s);
    t->b = 0.8 + 0.2 * rng_u01(&s);
    if (ghf_derive(t, &pb->der) != 0) return -1;
    pb->in.d = d;
    pb->in.mu = t->mu;
    pb->in.linv = pb->der.Linv;
    pb->in.w = pb->der.w;
    pb->in.c = pb->der.c;
    pb->in.stop_request = 0;
    return 0;
}

static int make_problem(problem *pb, int d, int64_t n, uint64_t seed, int rank, int size)
{
    memset(pb, 0, sizeof *pb);
    pb->d = d;
    pb->n_global = n;
    /* blocks over the first size-1 ranks; the last rank gets no rows (size > 1) */
    const int nb = size > 1 ? size - 1 : 1;
    if (rank < nb) {
        pb->row0 = n * rank / nb;
        pb->nrows = n * (rank + 1) / nb - pb->row0;
    }
    pb->x = malloc(sizeof(double) * (size_t)(pb->nrows > 0 ? pb->nrows : 1) * (size_t)d);
    if (!pb->x || ghf_params_alloc(&pb->prm, d) != 0 || ghf_derived_alloc(&pb->der, d) != 0) return -1;
    /* x = m + g y + sqrt(y) (correlated normal), y log-normal */
    for (int64_t i = 0; i < pb->nrows; i++) {
        uint64_t s = seed ^ (0x1234567ull * (uint64_t)(pb->row0 + i + 1));
        const double y = exp(0.5 * rng_normal(&s)), sy = sqrt(y);
        double prev = 0.0;
        for (int j = 0; j < d; j++) {
            const double g = rng_normal(&s);
            pb->x[i * d + j] = 0.1 * (j % 5) + 0.08 * ((j % 3) - 1) * y + sy * (g + 0.5 * prev);
            prev = g;
        }
    }
    return make_params(pb, seed * 7 + 1, 1.3);
}

static void free_problem(problem *pb)
{
    free(pb->x);
    ghf_params_free(&pb->prm);
    ghf_derived_free(&pb->der);
}

/* Serial reference on this rank's rows, and the magnitude of every entry
 * (sum of |terms|), both all-reduced. */
static void reference(const problem *pb, double *ref, double *mag, MPI_Comm comm)
{
    const int d = pb->d, len = ghf_stats_len(d);
    const ghf_estep_consts *c = &pb->in.c;
    double *z = malloc(sizeof(double) * (size_t)d);
    memset(ref, 0, sizeof(double) * (size_t)len);
    memset(mag, 0, sizeof(double) * (size_t)len);
    for (int64_t i = 0; i < pb->nrows; i++) {
        const double *x = pb->x + i * d;
        double q = 0.0, zw = 0.0;
        for (int a = 0; a < d; a++) {
            double v = 0.0;
            for (int k = 0; k <= a; k++) v += pb->in.linv[a * d + k] * (x[k] - pb->in.mu[k]);
            z[a] = v;
            q += v * v;
            zw += v * pb->in.w[a];
        }
        const ghf_point r = ghf_estep_point(c, q, zw, ghf_bessel_fused(c->P, ghf_estep_arg(c, q)));
        const int ok = isfinite(r.u) && isfinite(r.v) && isfinite(r.l) && isfinite(r.ll);
        const double u = ok ? r.u : 0.0;
        const double t[6] = {u, ok ? r.v : 0.0, ok ? r.l : 0.0, ok ? r.ll : 0.0, ok ? 0.0 : 1.0, ok ? fabs(zw) : 0.0};
        const int idx[6] = {GHF_ST_S1, GHF_ST_S2, GHF_ST_S3, GHF_ST_LL, GHF_ST_NBAD, GHF_ST_ZWABS};
        for (int k = 0; k < 6; k++) {
            ref[idx[k]] += t[k];
            mag[idx[k]] += fabs(t[k]);
        }
        ref[GHF_ST_N] += 1.0;
        mag[GHF_ST_N] += 1.0;
        for (int a = 0; a < d; a++) {
            ref[GHF_ST_S4 + a] += x[a];
            mag[GHF_ST_S4 + a] += fabs(x[a]);
            ref[ghf_stats_s5(d) + a] += u * x[a];
            mag[ghf_stats_s5(d) + a] += fabs(u * x[a]);
            for (int b = 0; b <= a; b++) {
                ref[ghf_stats_s6(d) + a * d + b] += u * x[a] * x[b];
                mag[ghf_stats_s6(d) + a * d + b] += fabs(u * x[a] * x[b]);
            }
        }
    }
    free(z);
    /* the stop flag: the sum of the ranks' requests */
    ref[GHF_ST_STOP] = pb->in.stop_request ? 1.0 : 0.0;
    mag[GHF_ST_STOP] = ref[GHF_ST_STOP];
    MPI_Allreduce(MPI_IN_PLACE, ref, len, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Allreduce(MPI_IN_PLACE, mag, len, MPI_DOUBLE, MPI_SUM, comm);
}

/* |a - b| <= tol * max(|b|, mag) on every entry the M-step reads. */
static double compare(const char *what, int d, const double *a, const double *b, const double *mag,
                      double tol)
{
    const int len = ghf_stats_len(d);
    double worst = 0.0;
    int worst_i = -1;
    for (int i = 0; i < len; i++) {
        if (i >= ghf_stats_s6(d)) {
            const int k = i - ghf_stats_s6(d), r = k / d, col = k % d;
            if (col > r) continue; /* upper triangle: not part of the contract */
        }
        const double scale = fmax(fabs(b[i]), mag[i]);
        const double e = fabs(a[i] - b[i]) / (scale > 0.0 ? scale : 1.0);
        if (!(e <= worst) || worst_i < 0) {
            worst = e;
            worst_i = i;
        }
    }
    CHECK(worst <= tol, "%s d=%d: entry %d differs: %.17g vs %.17g (rel %.3g > %.1g)", what, d, worst_i,
          a[worst_i], b[worst_i], worst, tol);
    return worst;
}

static void check_bitwise(const char *what, int d, const double *a, const double *b)
{
    const int len = ghf_stats_len(d);
    int diff = -1;
    for (int i = 0; i < len && diff < 0; i++)
        if (memcmp(&a[i], &b[i], sizeof(double)) != 0) diff = i;
    CHECK(diff < 0, "%s d=%d: not bitwise equal at entry %d: %.17g vs %.17g", what, d, diff,
          diff >= 0 ? a[diff] : 0.0, diff >= 0 ? b[diff] : 0.0);
}

static ghf_backend *make_cuda(const problem *pb, const ghf_cuda_opts *o)
{
    char err[512] = "";
    ghf_backend *be = ghf_backend_cuda_create_opts(MPI_COMM_WORLD, pb->x, pb->nrows, pb->d, o, err,
                                                   sizeof err);
    CHECK(be != NULL, "ghf_backend_cuda_create_opts (d=%d): %s", pb->d, err);
    return be;
}

static int run(ghf_backend *be, const problem *pb, double *stats)
{
    char err[512] = "";
    const int rc = be->estep(be, &pb->in, stats, err, sizeof err);
    CHECK(rc == 0, "estep (d=%d): %s", pb->d, err);
    return rc;
}

static void test_dim(int d, int64_t n, int size)
{
    problem pb;
    if (make_problem(&pb, d, n, 1000 + (uint64_t)d, g_rank, size) != 0) {
        CHECK(0, "could not make the problem for d=%d", d);
        return;
    }
    const int len = ghf_stats_len(d);
    double *cpu = calloc((size_t)len, sizeof(double)), *ref = calloc((size_t)len, sizeof(double));
    double *mag = calloc((size_t)len, sizeof(double)), *g1 = calloc((size_t)len, sizeof(double));
    double *g2 = calloc((size_t)len, sizeof(double)), *g3 = calloc((size_t)len, sizeof(double));
    double *e1 = calloc((size_t)len, sizeof(double)), *v = calloc((size_t)len, sizeof(double));
    char err[512] = "";
    const double tol = 1e-12;

    /* CPU backend and the serial reference */
    ghf_backend *cb = ghf_backend_cpu_create(MPI_COMM_WORLD, pb.x, pb.nrows, d, err, sizeof err);
    CHECK(cb != NULL, "cpu backend: %s", err);
    if (cb) run(cb, &pb, cpu);
    reference(&pb, ref, mag, MPI_COMM_WORLD);
    compare("cpu vs serial reference", d, cpu, ref, mag, tol);

    ghf_cuda_opts o;
    ghf_cuda_opts_default(&o);
    o.reduce = size == 1 ? GHF_CUDA_REDUCE_NCCL : GHF_CUDA_REDUCE_MPI;

    /* graph backend: call 1 eager (warm-up + capture), calls 2, 3 replays */
    ghf_backend *gb = make_cuda(&pb, &o);
    if (gb) {
        run(gb, &pb, g1);
        run(gb, &pb, g2);
        run(gb, &pb, g3);
        ghf_cuda_info info;
        ghf_cuda_get_info(gb, &info);
        CHECK(info.graph == 1 && info.graph_nodes > 0, "d=%d: no graph was captured (nodes %d)", d,
              info.graph_nodes);
        CHECK(gb->n_calls == 3, "d=%d: n_calls %lld", d, (long long)gb->n_calls);
        CHECK(gb->t_estep > 0.0 && gb->t_allreduce >= 0.0, "d=%d: timings %g %g", d, gb->t_estep,
              gb->t_allreduce);
        const double w = compare("cuda vs cpu", d, g1, cpu, mag, tol);
        compare("cuda vs serial reference", d, g1, ref, mag, tol);
        check_bitwise("eager first call vs graph replay", d, g1, g2);
        check_bitwise("graph replay vs replay", d, g2, g3);
        CHECK(g1[GHF_ST_N] == (double)n && g1[GHF_ST_STOP] == 0.0, "d=%d: n %g stop %g", d,
              g1[GHF_ST_N], g1[GHF_ST_STOP]);
        if (g_rank == 0)
            printf("d=%3d n=%lld: %s path, plan %d, nodes %d, worst rel diff vs cpu %.2e\n", d,
                   (long long)n, info.fused ? "fused" : info.wide ? "wide fused" : "cuBLAS", gb->last_used_plan,
                   info.graph_nodes, w);

        /* new parameters through the same graph, and a stop request */
        problem p2 = pb;
        if (ghf_params_alloc(&p2.prm, d) == 0 && ghf_derived_alloc(&p2.der, d) == 0 &&
            make_params(&p2, 77 + (uint64_t)d, -0.5) == 0) {
            p2.in.stop_request = g_rank == 0;
            double *c2 = calloc((size_t)len, sizeof(double)), *r2 = calloc((size_t)len, sizeof(double));
            double *m2 = calloc((size_t)len, sizeof(double));
            run(gb, &p2, g3);
            reference(&p2, r2, m2, MPI_COMM_WORLD);
            if (cb) run(cb, &p2, c2);
            compare("cuda (2nd parameters, graph) vs cpu", d, g3, c2, m2, tol);
            compare("cuda (2nd parameters, graph) vs reference", d, g3, r2, m2, tol);
            CHECK(g3[GHF_ST_STOP] == 1.0, "d=%d: stop flag %g, expected 1", d, g3[GHF_ST_STOP]);
            free(c2);
            free(r2);
            free(m2);
        } else {
            CHECK(0, "second parameter set for d=%d", d);
        }
        ghf_params_free(&p2.prm);
        ghf_derived_free(&p2.der);
        gb->destroy(gb);
    }

    /* eager-only backend: bitwise the same as the graph */
    ghf_cuda_opts oe = o;
    oe.graph = 0;
    ghf_backend *eb = make_cuda(&pb, &oe);
    if (eb) {
        run(eb, &pb, e1);
        run(eb, &pb, v);
        check_bitwise("eager backend vs graph", d, e1, g2);
        check_bitwise("eager backend, second call", d, e1, v);
        eb->destroy(eb);
    }

    /* variants (host-staged MPI reduction: no NCCL set-up per variant) */
    struct {
        const char *name;
        int plan, zrange, fused_dmax, minb, mma;
        int64_t chunk_bytes, plan_min_rows;
        int wide;
    } var[] = {
        {"MPI reduction", -1, 1, GHF_CUDA_FUSED_DMAX, 0, -1, (int64_t)256 << 20, o.plan_min_rows, 0},
        {"direct Bessel", 0, 1, GHF_CUDA_FUSED_DMAX, 0, -1, (int64_t)256 << 20, 0, 0},
        {"plan, exact z-range", 1, 0, GHF_CUDA_FUSED_DMAX, 0, -1, (int64_t)256 << 20, 0, 0},
        {"tensor-core sums", 1, 1, GHF_CUDA_FUSED_DMAX, 0, 1, (int64_t)256 << 20, 0, 0},
        {"register sums, 2 blocks/SM", 1, 1, GHF_CUDA_FUSED_DMAX, 2, 0, (int64_t)256 << 20, 0, 0},
        {"register sums, 3 blocks/SM", 1, 1, GHF_CUDA_FUSED_DMAX, 3, 0, (int64_t)256 << 20, 0, 0},
        {"register sums, 4 blocks/SM", 1, 1, GHF_CUDA_FUSED_DMAX, 4, 0, (int64_t)256 << 20, 0, 0},
        {"cuBLAS path, 3+ chunks", -1, 1, 0, 0, -1, (int64_t)(n / 3 + 1) * d * 8, 0, 0},
        {"wide fused kernel", -1, 1, GHF_CUDA_FUSED_DMAX, 0, -1, (int64_t)256 << 20, 0, 1},
        {"wide fused kernel, plan, exact z-range", 1, 0, GHF_CUDA_FUSED_DMAX, 0, -1, (int64_t)256 << 20, 0, 1},
        {"wide fused kernel, direct Bessel", 0, 1, GHF_CUDA_FUSED_DMAX, 0, -1, (int64_t)256 << 20, 0, 1},
    };
    const int wide_d = d > GHF_CUDA_FUSED_DMAX && d <= GHF_CUDA_WIDE_DMAX;
    for (size_t k = 0; k < sizeof var / sizeof var[0]; k++) {
        if (var[k].wide && !wide_d) continue;
        ghf_cuda_opts ov = o;
        ov.reduce = GHF_CUDA_REDUCE_MPI;
        ov.plan = var[k].plan;
        ov.zrange = var[k].zrange;
        ov.fused_dmax = var[k].fused_dmax;
        ov.chunk_bytes = var[k].chunk_bytes;
        ov.minb = var[k].minb;
        ov.mma = var[k].mma;
        ov.plan_min_rows = var[k].plan_min_rows;
        ov.wide = var[k].wide;
        ghf_backend *vb = make_cuda(&pb, &ov);
        if (!vb) continue;
        if (var[k].wide) {
            ghf_cuda_info vi;
            ghf_cuda_get_info(vb, &vi);
            CHECK(vi.wide == 1, "d=%d: %s: the backend chose the %s path (needs sm_80 and the shared memory)", d,
                  var[k].name, vi.fused ? "fused" : "cuBLAS");
        }
        run(vb, &pb, v);
        run(vb, &pb, e1); /* replay */
        char what[128];
        snprintf(what, sizeof what, "cuda (%s) vs cpu", var[k].name);
        compare(what, d, v, cpu, mag, tol);
        snprintf(what, sizeof what, "cuda (%s): graph replay vs eager", var[k].name);
        check_bitwise(what, d, v, e1);
        if (k == 0 && size == 1) {
            /* same work as the NCCL backend; a one-rank reduction adds nothing */
            check_bitwise("MPI vs NCCL reduction (np=1)", d, v, g1);
        }
        vb->destroy(vb);
    }

    if (cb) cb->destroy(cb);
    free(cpu);
    free(ref);
    free(mag);
    free(g1);
    free(g2);
    free(g3);
    free(e1);
    free(v);
    free_problem(&pb);
}

/* Weights and float32 storage at dimension d (see the header). */
static void test_weights_f32(int d, int64_t n, int size)
{
    problem pb;
    if (make_problem(&pb, d, n, 5000 + (uint64_t)d, g_rank, size) != 0) {
        CHECK(0, "could not make the problem for d=%d", d);
        return;
    }
    const int len = ghf_stats_len(d);
    const size_t m = (size_t)(pb.nrows > 0 ? pb.nrows : 1) * (size_t)d;
    double *cpu = calloc((size_t)len, sizeof(double)), *ref = calloc((size_t)len, sizeof(double));
    double *mag = calloc((size_t)len, sizeof(double)), *a = calloc((size_t)len, sizeof(double));
    double *b = calloc((size_t)len, sizeof(double)), *u = calloc((size_t)len, sizeof(double));
    double *un = calloc((size_t)len, sizeof(double)), *f = calloc((size_t)len, sizeof(double));
    double *w = malloc(sizeof(double) * (size_t)(pb.nrows > 0 ? pb.nrows : 1));
    float *x32 = malloc(sizeof(float) * m);
    double *shift = malloc(sizeof(double) * (size_t)d);
    char err[512] = "";
    const double tol = 1e-12;
    if (!cpu || !ref || !mag || !a || !b || !u || !un || !f || !w || !x32 || !shift) {
        CHECK(0, "out of memory (d=%d)", d);
        goto done;
    }
    /* float32-representable rows, centred as the host does: x = (double)x32 - shift */
    for (int j = 0; j < d; j++) shift[j] = 0.1 * (j % 5) + 1.0 / 3.0;
    for (int64_t i = 0; i < pb.nrows; i++)
        for (int j = 0; j < d; j++) {
            x32[i * d + j] = (float)(pb.x[i * d + j] + shift[j]);
            pb.x[i * d + j] = (double)x32[i * d + j] - shift[j];
        }
    /* weights in [0, 2), every 7th row exactly 0 */
    uint64_t s = 99 + (uint64_t)pb.row0;
    for (int64_t i = 0; i < pb.nrows; i++) w[i] = (pb.row0 + i) % 7 == 3 ? 0.0 : 2.0 * rng_u01(&s);
    reference(&pb, ref, mag, MPI_COMM_WORLD);
    for (int i = 0; i < len; i++) mag[i] *= 2.0; /* weights below 2 */

    ghf_backend *cb = ghf_backend_cpu_create(MPI_COMM_WORLD, pb.x, pb.nrows, d, err, sizeof err);
    CHECK(cb != NULL, "cpu backend: %s", err);
    if (cb) {
        cb->weights = w;
        run(cb, &pb, cpu);
    }
    ghf_cuda_opts o;
    ghf_cuda_opts_default(&o);
    o.reduce = size == 1 ? GHF_CUDA_REDUCE_NCCL : GHF_CUDA_REDUCE_MPI;

    /* unweighted float64 CUDA statistics (for the toggle) */
    ghf_backend *ub = make_cuda(&pb, &o);
    if (ub) {
        run(ub, &pb, un);
        ub->destroy(ub);
    }
    /* weighted: eager first call, graph replay, one unweighted call, replay */
    ghf_backend *wb = make_cuda(&pb, &o);
    if (wb) {
        wb->weights = w;
        run(wb, &pb, a);
        run(wb, &pb, b);
        compare("weighted cuda vs weighted cpu", d, a, cpu, mag, tol);
        check_bitwise("weighted: eager first call vs graph replay", d, a, b);
        wb->weights = NULL;
        run(wb, &pb, u);
        check_bitwise("weighted backend, one unweighted call vs the unweighted backend", d, u, un);
        wb->weights = w;
        run(wb, &pb, b);
        check_bitwise("weighted again after the unweighted call", d, a, b);
        CHECK(fabs(a[GHF_ST_N] - cpu[GHF_ST_N]) <= 1e-12 * cpu[GHF_ST_N], "d=%d: weighted count %.17g vs %.17g", d,
              a[GHF_ST_N], cpu[GHF_ST_N]);
        wb->destroy(wb);
    }
    /* float32 storage: the same statistics as the float64 shard, on the
     * default path, on the cuBLAS path and (12 < d <= 128) on the wide fused
     * kernel, unweighted and weighted; the wide kernel's weighted statistics
     * against the weighted CPU backend */
    for (int path = 0; path < 3; path++) {
        if (path == 2 && !(d > GHF_CUDA_FUSED_DMAX && d <= GHF_CUDA_WIDE_DMAX)) continue;
        ghf_cuda_opts of = o;
        of.reduce = GHF_CUDA_REDUCE_MPI;
        if (path == 1) { /* the cuBLAS path, whatever GHFIT_CUDA_WIDE says */
            of.fused_dmax = 0;
            of.wide = 0;
        }
        if (path == 2) {
            of.wide = 1;
            of.zrange = 0; /* the plan's exact z-range: k_qmax_wide on the float32 shard too */
        }
        ghf_backend *db = make_cuda(&pb, &of);
        ghf_cuda_opts o32 = of;
        o32.x32 = x32;
        o32.shift = shift;
        ghf_backend *fb = ghf_backend_cuda_create_opts(MPI_COMM_WORLD, NULL, pb.nrows, d, &o32, err, sizeof err);
        CHECK(fb != NULL, "float32 backend (d=%d): %s", d, err);
        if (db && fb) {
            ghf_cuda_info info;
            ghf_cuda_get_info(fb, &info);
            CHECK(info.f32 == (info.fused || info.wide), "d=%d: float32 on the device %d (fused %d, wide %d)", d,
                  info.f32, info.fused, info.wide);
            CHECK(path != 2 || info.wide == 1, "d=%d: the wide fused kernel was not chosen", d);
            const char *pname = info.fused ? "fused" : info.wide ? "wide fused" : "cuBLAS";
            for (int wtd = 0; wtd < 2; wtd++) {
                db->weights = fb->weights = wtd ? w : NULL;
                run(db, &pb, a);
                run(fb, &pb, f);
                run(fb, &pb, b);
                char what[160];
                snprintf(what, sizeof what, "float32 vs float64 shard (%s path%s)", pname,
                         wtd ? ", weighted" : "");
                const double e = compare(what, d, f, a, mag, tol);
                int same = 1;
                for (int i = 0; i < len; i++) same &= memcmp(&a[i], &f[i], sizeof(double)) == 0;
                snprintf(what, sizeof what, "float32 (%s path%s): replay", pname,
                         wtd ? ", weighted" : "");
                check_bitwise(what, d, f, b);
                if (path == 2 && wtd) compare("weighted wide fused (float32) vs weighted cpu", d, f, cpu, mag, tol);
                if (g_rank == 0)
                    printf("d=%3d float32 (%s path%s, on the device: %s): rel diff vs float64 %.2e%s\n", d,
                           pname, wtd ? ", weighted" : "", info.f32 ? "float32" : "float64",
                           e, same ? " (bitwise equal)" : "");
            }
        }
        if (db) db->destroy(db);
        if (fb) fb->destroy(fb);
    }
    if (cb) cb->destroy(cb);
done:
    free(cpu), free(ref), free(mag), free(a), free(b), free(u), free(un), free(f), free(w), free(x32), free(shift);
    free_problem(&pb);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int have = ghf_cuda_device_count() > 0, all = have;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (g_rank == 0) printf("SKIP: no CUDA device on every rank\n");
        MPI_Finalize();
        return 77;
    }
    /* 12 < d <= 128: the wide kernel's cases; row counts leave a partial 64-row tile */
    const int dims[] = {1, 3, 10, 13, 50, 64, 100, 128, 200};
    const int64_t rows[] = {40000, 40000, 30000, 20011, 8005, 6000, 4003, 3001, 3000};
    /* GHF_TEST_QUICK=1: a tenth of the rows (for runs under compute-sanitizer) */
    const char *q = getenv("GHF_TEST_QUICK");
    const int64_t div = (q && q[0] == '1') ? 10 : 1;
    /* GHF_TEST_WIDE_ONLY=1: only the wide kernel's dimensions (for racecheck / synccheck runs) */
    const char *wo = getenv("GHF_TEST_WIDE_ONLY");
    const int wide_only = wo && wo[0] == '1';
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        if (wide_only && (dims[k] <= GHF_CUDA_FUSED_DMAX || dims[k] > GHF_CUDA_WIDE_DMAX)) continue;
        test_dim(dims[k], rows[k] / div, size);
    }
    const int wdims[] = {3, 10, 13, 64, 100};
    const int64_t wrows[] = {30000, 30000, 10007, 6000, 4003};
    for (size_t k = 0; k < sizeof wdims / sizeof wdims[0]; k++) {
        if (wide_only && (wdims[k] <= GHF_CUDA_FUSED_DMAX || wdims[k] > GHF_CUDA_WIDE_DMAX)) continue;
        test_weights_f32(wdims[k], wrows[k] / div, size);
    }
    int bad = g_fail, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("%s (%d failures)\n", any ? "FAILED" : "PASSED", any);
    MPI_Finalize();
    return any ? 1 : 0;
}
