/* test_job.c - job files (libyaml parsing, error lines, effective config
 * round trip), sweep expansion and naming, group-independent pieces of
 * `ghfit run` (record serialisation, summary table order) and the checkpoint
 * file (write/read round trip, _prev kept, identity check). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resume.h"
#include "fit.h"
#include "job.h"
#include "record.h"
#include "summary.h"
#include "testutil.h"

static int parse(const char *text, ghf_job *j, char *err, size_t errlen)
{
    return ghf_job_parse(text, strlen(text), "job.yaml", j, err, errlen);
}

/* the parse must fail with status 2 and a message that starts with want */
static void expect_error(const char *text, const char *want)
{
    ghf_job j;
    char err[1024] = "";
    const int rc = parse(text, &j, err, sizeof err);
    CHECK(rc == 2, "expected status 2 for [%s], got %d", text, rc);
    CHECK(strncmp(err, want, strlen(want)) == 0, "message '%s' does not start with '%s'", err, want);
    ghf_job_free(&j);
}

static void test_parse(void)
{
    const char *text = "# a sweep\n"
                       "name: demo\n"
                       "data:\n"
                       "  file: x.h5\n"
                       "  dataset: /returns\n"
                       "  rows: {start: 100, length: 5000}\n"
                       "out: r.h5\n"
                       "family: [gh, nig]\n"
                       "p: [free, -0.5, 1]\n"
                       "tol: [1e-8, 1e-6]\n"
                       "seed: [1, 2, 3]\n"
                       "windows: {start: 0, length: 1000, step: 500}\n"
                       "warm_start: yes\n"
                       "max_iter: 300\n"
                       "starts: 6\n"
                       "accel: none\n"
                       "backend: cpu\n"
                       "quiet: true\n"
                       "rows_per_rank: 1000\n"
                       "checkpoint: ck.h5\n"
                       "checkpoint_every: 7\n";
    ghf_job j;
    char err[1024] = "";
    int rc = parse(text, &j, err, sizeof err);
    CHECK(rc == 0, "parse: %s", err);
    CHECK(j.data_file && !strcmp(j.data_file, "x.h5"), "data.file");
    CHECK(j.dataset && !strcmp(j.dataset, "/returns"), "data.dataset");
    CHECK(j.rows_start == 100 && j.rows_len == 5000, "data.rows %lld %lld", (long long)j.rows_start, (long long)j.rows_len);
    CHECK(j.n_family == 2 && j.family[0] == GHF_FAMILY_GH && j.family[1] == GHF_FAMILY_NIG, "family");
    CHECK(j.n_p == 3 && !j.p[0].fixed && j.p[1].fixed && j.p[1].value == -0.5 && j.p[2].value == 1.0, "p");
    CHECK(j.n_tol == 2 && j.tol[0] == 1e-8 && j.tol[1] == 1e-6, "tol");
    CHECK(j.n_seed == 3 && j.seed[2] == 3, "seed");
    CHECK(j.has_windows && j.win_len == 1000 && j.win_step == 500 && j.win_count < 0, "windows");
    CHECK(j.warm_start == 1 && j.max_iter == 300 && j.starts == 6 && j.accel == 0 && j.quiet == 1, "scalars");
    CHECK(j.rows_per_rank == 1000 && j.checkpoint && j.checkpoint_every == 7, "checkpoint keys");
    CHECK(ghf_job_validate(&j, err, sizeof err) == 0, "validate: %s", err);

    /* the effective configuration parses back to the same job (same text, same hash) */
    char *cfg = ghf_job_config_text(&j);
    ghf_job j2;
    rc = ghf_job_parse(cfg, strlen(cfg), "job.yaml", &j2, err, sizeof err);
    CHECK(rc == 0, "config text does not parse: %s\n%s", err, cfg);
    char *cfg2 = ghf_job_config_text(&j2);
    CHECK(strcmp(cfg, cfg2) == 0, "config text round trip differs:\n%s\n---\n%s", cfg, cfg2);
    CHECK(ghf_job_hash(&j) == ghf_job_hash(&j2), "hash differs after the round trip");
    /* the hash follows result-determining keys only */
    const uint64_t h = ghf_job_hash(&j2);
    j2.quiet = 0;
    free(j2.out);
    j2.out = strdup("other.h5");
    CHECK(ghf_job_hash(&j2) == h, "hash depends on out/quiet");
    j2.max_iter++;
    CHECK(ghf_job_hash(&j2) != h, "hash ignores max_iter");
    free(cfg);
    free(cfg2);
    ghf_job_free(&j2);

    /* expansion: 100..5099 is 5000 rows: windows of 1000 every 500 -> 9 windows */
    ghf_fit_spec *s = NULL;
    int ns = 0, nt = 0;
    rc = ghf_job_expand(&j, 20000, &s, &ns, &nt, err, sizeof err);
    CHECK(rc == 0, "expand: %s", err);
    /* chains: gh x 3 p x 2 tol x 3 seeds + nig x 2 tol x 3 seeds = 18 + 6 = 24 */
    CHECK(nt == 24 * 9 && ns == nt, "expanded %d / %d fits, expected %d", ns, nt, 24 * 9);
    if (rc == 0 && ns == nt) {
        CHECK(!strcmp(s[0].name, "gh_pfree_tol1e-08_s1_w000000"), "name 0: %s", s[0].name);
        CHECK(s[0].row_start == 100 && s[0].row_len == 1000, "window 0 rows %lld", (long long)s[0].row_start);
        CHECK(s[8].row_start == 100 + 8 * 500 && s[8].window == 8, "window 8 rows %lld", (long long)s[8].row_start);
        CHECK(!strcmp(s[9].name, "gh_pfree_tol1e-08_s2_w000000"), "name 9: %s", s[9].name);
        CHECK(s[9].chain == 1 && s[8].chain == 0, "chains");
        /* p = -0.5 fixed */
        const ghf_fit_spec *f = &s[6 * 9];
        CHECK(f->fix_p && f->p == -0.5 && !strcmp(f->name, "gh_p-0.5_tol1e-08_s1_w000000"), "fixed p name %s", f->name);
        const ghf_fit_spec *nig = &s[18 * 9 + 10];
        CHECK(nig->family == GHF_FAMILY_NIG && !strcmp(nig->name, "nig_tol1e-08_s2_w000001"), "nig name %s", nig->name);
        /* every name unique and short enough for /summary */
        int dup = 0;
        for (int a = 0; a < ns; a++) {
            CHECK(strlen(s[a].name) < 64, "name too long");
            for (int b = a + 1; b < ns && !dup; b++) dup = !strcmp(s[a].name, s[b].name);
        }
        CHECK(!dup, "duplicate fit names");
    }
    free(s);

    /* slices K/5: the groups of a run with 5 groups (issue: arrays keep
     * warm-start chains whole).  Every chain has 9 windows >= 5, so slice K
     * holds, of every chain, the windows q with floor(q * 5 / 9) == K: a
     * contiguous block; the slices partition the fits. */
    int seen[216] = {0};
    for (int k = 0; k < 5; k++) {
        j.slice_k = k;
        j.slice_n = 5;
        rc = ghf_job_expand(&j, 20000, &s, &ns, &nt, err, sizeof err);
        CHECK(rc == 0 && nt == 216, "slice %d/5: %d fits of %d (%s)", k, ns, nt, err);
        for (int a = 0; rc == 0 && a < ns; a++) {
            const int q = s[a].index % 9; /* its window in its chain */
            CHECK(q * 5 / 9 == k && s[a].window == q, "slice %d: fit %d (window %d) is not in block %d", k,
                  s[a].index, q, k);
            CHECK(a == 0 || s[a].index > s[a - 1].index, "slice %d: fits out of order", k);
            if (s[a].index >= 0 && s[a].index < 216) seen[s[a].index]++;
            /* within a chain, the slice's windows are consecutive */
            if (a > 0 && s[a].chain == s[a - 1].chain)
                CHECK(s[a].window == s[a - 1].window + 1, "slice %d: a gap in chain %d", k, s[a].chain);
        }
        free(s);
    }
    int once = 1;
    for (int a = 0; a < 216; a++) once &= seen[a] == 1;
    CHECK(once, "the 5 slices do not partition the 216 fits");
    /* windows that do not fit */
    j.slice_k = 0;
    j.slice_n = 1;
    rc = ghf_job_expand(&j, 900, &s, &ns, &nt, err, sizeof err);
    CHECK(rc == 2 && strstr(err, "900"), "window beyond the data: %d %s", rc, err);
    ghf_job_free(&j);
}

static void test_errors(void)
{
    expect_error("data: x.h5\nout: r.h5\n\n\nfamily: gh\ntol: 1e-8\ntolerence: 1e-8\n", "job.yaml:7: unknown key 'tolerence'");
    expect_error("data:\n  file: x.h5\n  datset: /X\n", "job.yaml:3: unknown key 'datset' in data");
    expect_error("data: x.h5\ntol: abc\n", "job.yaml:2: tol: 'abc' is not a non-negative number");
    expect_error("data: x.h5\ntol: [1e-8, -1]\n", "job.yaml:2: tol: '-1' is not a non-negative number");
    expect_error("family: [gh, student]\n", "job.yaml:1: family: unknown family 'student'");
    expect_error("p: [free, banana]\n", "job.yaml:1: p: 'banana' is neither");
    expect_error("max_iter: 1.5\n", "job.yaml:1: max_iter: '1.5' is not an integer");
    expect_error("seed: [1, 1]\n", "job.yaml:1: seed: '1' is listed twice");
    expect_error("warm_start: maybe\n", "job.yaml:1: warm_start: expected true or false");
    expect_error("windows: {start: 0, step: 10}\n", "job.yaml:1: windows: 'length' is required");
    expect_error("out: a.h5\nout: b.h5\n", "job.yaml:2: duplicate key 'out'");
    expect_error("data: [1, 2\n", "job.yaml:");
    expect_error("- a\n- b\n", "job.yaml:1: : expected a mapping");
    expect_error("", "job.yaml:1: the job file is empty");
    expect_error("backend: gpu\n", "job.yaml:1: backend: unknown backend 'gpu'");
    /* validation after parsing */
    ghf_job j;
    char err[512];
    CHECK(parse("data: x.h5\nfamily: nig\np: 1\nout: r.h5\n", &j, err, sizeof err) == 0, "parse");
    CHECK(ghf_job_validate(&j, err, sizeof err) == 2 && strstr(err, "fixed p"), "nig with fixed p: %s", err);
    ghf_job_free(&j);
    CHECK(parse("family: gh\n", &j, err, sizeof err) == 0, "parse");
    CHECK(ghf_job_validate(&j, err, sizeof err) == 2 && strstr(err, "'data'"), "missing data: %s", err);
    ghf_job_free(&j);
    int k, n;
    CHECK(ghf_parse_slice("3/4", &k, &n) == 0 && k == 3 && n == 4, "slice 3/4");
    CHECK(ghf_parse_slice("4/4", &k, &n) != 0 && ghf_parse_slice("1", &k, &n) != 0 &&
              ghf_parse_slice("-1/2", &k, &n) != 0, "bad slices accepted");
}

/* a fake finished fit */
static void make_record(ghf_fit_record *r, int d, double *buf, double ll, const char *name)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < 4 * d + 3 * d * d + 20 + GHF_NPHASES * 2; i++) buf[i] = 0.25 * i - 3.0 + ll * 1e-9;
    r->name = name;
    r->family = "gh";
    r->n_obs = 1234;
    r->d = d;
    r->n_iter = 9;
    r->converged = 1;
    r->status = "converged";
    r->loglik = ll;
    r->aic = -2 * ll + 10;
    r->bic = -2 * ll + 20;
    r->elapsed_s = 0.5;
    r->loglik_trace = buf;
    r->n_trace = 10;
    r->mu = buf + 10;
    r->gamma = buf + 10 + d;
    r->sigma = buf + 10 + 2 * d;
    r->p = -1.25;
    r->a = 2.5;
    r->b = 0.125;
    r->mean = buf + 10 + 2 * d + d * d;
    r->cov = NULL;
    r->n_phases = GHF_NPHASES;
    r->phase_names = ghf_phase_names;
    r->n_ranks = 2;
    r->phase_s = buf + 10 + 3 * d + d * d;
    r->backend = "cpu";
    r->n_dropped = 3;
}

static void test_records(void)
{
    const int d = 3;
    double buf[200];
    ghf_fit_record r;
    make_record(&r, d, buf, -100.5, "gh_x");
    ghf_pack b = {0};
    ghf_rec_pack(&b, 42, &r);
    ghf_unpack u = {b.p, b.n, 0, 0};
    ghf_rec o;
    CHECK(ghf_rec_unpack(&u, &o) == 0 && u.off == b.n, "record unpack");
    CHECK(o.index == 42 && !strcmp(o.r.name, "gh_x") && !strcmp(o.r.status, "converged"), "record strings");
    CHECK(o.r.n_trace == 10 && memcmp(o.r.loglik_trace, buf, 10 * sizeof(double)) == 0, "trace");
    CHECK(memcmp(o.r.sigma, r.sigma, (size_t)d * d * sizeof(double)) == 0 && o.r.p == r.p && o.r.b == r.b, "params");
    CHECK(o.r.mean && !o.r.cov, "optional moments");
    CHECK(o.r.n_ranks == 2 && memcmp(o.r.phase_s, r.phase_s, 2 * GHF_NPHASES * sizeof(double)) == 0, "phases");
    CHECK(o.r.n_dropped == 3 && !strcmp(o.r.backend, "cpu"), "tail fields");
    ghf_rec_free(&o);
    /* truncated bytes are rejected */
    ghf_unpack t = {b.p, b.n / 2, 0, 0};
    CHECK(ghf_rec_unpack(&t, &o) != 0, "a truncated record was accepted");
    ghf_pack_free(&b);
}

static void test_summary_order(void)
{
    ghf_summary_row rows[3];
    memset(rows, 0, sizeof rows);
    const char *names[3] = {"b", "a", "c"};
    const double ll[3] = {-10.0, -12.0, -11.0};
    const int k[3] = {5, 2, 3};
    for (int i = 0; i < 3; i++) {
        snprintf(rows[i].s.name, sizeof rows[i].s.name, "%s", names[i]);
        snprintf(rows[i].s.family, sizeof rows[i].s.family, "gh");
        rows[i].s.loglik = ll[i];
        rows[i].s.aic = -2 * ll[i] + 2 * k[i]; /* 30, 28, 28 */
        rows[i].s.bic = -2 * ll[i] + 7 * k[i]; /* 55, 38, 43 */
        rows[i].file = "f.h5";
    }
    FILE *devnull = fopen("/dev/null", "w");
    ghf_summary_print(devnull, rows, 3, GHF_SORT_AIC);
    CHECK(!strcmp(rows[0].s.name, "a") && !strcmp(rows[1].s.name, "c") && !strcmp(rows[2].s.name, "b"),
          "aic order (ties by name): %s %s %s", rows[0].s.name, rows[1].s.name, rows[2].s.name);
    ghf_summary_print(devnull, rows, 3, GHF_SORT_LOGLIK);
    CHECK(!strcmp(rows[0].s.name, "b") && !strcmp(rows[2].s.name, "a"), "loglik order: %s .. %s", rows[0].s.name,
          rows[2].s.name);
    ghf_summary_print(devnull, rows, 3, GHF_SORT_BIC);
    CHECK(!strcmp(rows[0].s.name, "a") && !strcmp(rows[1].s.name, "c"), "bic order");
    ghf_summary_print(devnull, rows, 3, GHF_SORT_NAME);
    CHECK(!strcmp(rows[0].s.name, "a") && !strcmp(rows[1].s.name, "b"), "name order");
    fclose(devnull);
    ghf_sort_key key;
    CHECK(ghf_sort_key_parse("bic", &key) == 0 && key == GHF_SORT_BIC && ghf_sort_key_parse("xyz", &key) != 0, "keys");
}

static void test_checkpoint_file(const char *dir)
{
    char path[1024], prev[1100];
    snprintf(path, sizeof path, "%s/ck.h5", dir);
    ghf_ckpt_prev_path(path, prev, sizeof prev);
    CHECK(strstr(prev, "/ck_prev.h5") != NULL, "prev path %s", prev);
    unlink(path);
    unlink(prev);
    const int d = 2;
    ghf_params t;
    ghf_params_alloc(&t, d);
    ghf_em_state st;
    ghf_em_state_alloc(&st, d, 10);
    for (int i = 0; i < d; i++) {
        st.cur.mu[i] = 0.1 * i + 1e-17;
        st.cur.gamma[i] = -0.3 * i;
        st.prev.mu[i] = 0.7;
    }
    for (int i = 0; i < d * d; i++) st.cur.sigma[i] = st.prev.sigma[i] = (i % 3 == 0) ? 1.0 : 0.1;
    st.cur.p = -1.0 / 3.0;
    st.cur.a = M_PI;
    st.cur.b = 1e-300;
    st.iter = 4;
    for (int i = 0; i < 4; i++) st.trace[i] = -1000.0 + i / 7.0;
    ghf_ckpt c;
    memset(&c, 0, sizeof c);
    ghf_ckpt_id id = {"run", "/nonexistent/data.h5", "/X", 500, d, 0x1234abcdULL, 7, "a: 1\n", 0, 0, 0, NULL, 0};
    CHECK(ghf_ckpt_set_id(&c, &id) == 0, "set id");
    c.run = calloc(1, sizeof *c.run);
    c.n_run = 1;
    CHECK(ghf_ckpt_run_set(&c.run[0], 5, "fitname", &st) == 0, "run set");
    double buf[200];
    ghf_fit_record r;
    make_record(&r, d, buf, -7.0, "done0");
    ghf_pack b = {0};
    ghf_rec_pack(&b, 3, &r);
    int64_t idx = 3, off[2] = {0, (int64_t)b.n};
    c.n_done = 1;
    c.done_index = &idx;
    c.done_off = off;
    c.done_blob = b.p;
    char err[1024];
    CHECK(ghf_ckpt_write(path, &c, err, sizeof err) == 0, "write 1: %s", err);
    CHECK(access(prev, F_OK) != 0, "a _prev after the first write");
    c.run[0].iter = 3; /* a second, different checkpoint */
    CHECK(ghf_ckpt_write(path, &c, err, sizeof err) == 0, "write 2: %s", err);
    CHECK(access(prev, F_OK) == 0, "no _prev after the second write");
    c.done_index = NULL;
    c.done_off = NULL;
    c.done_blob = NULL;
    c.n_done = 0;
    ghf_ckpt rd;
    CHECK(ghf_ckpt_read(path, &rd, err, sizeof err) == 0, "read: %s", err);
    CHECK(!strcmp(rd.kind, "run") && rd.n_rows == 500 && rd.d == d && rd.hash == 0x1234abcdULL && rd.n_fits == 7,
          "identity read back");
    CHECK(rd.config_text && !strcmp(rd.config_text, "a: 1\n"), "config");
    CHECK(rd.n_run == 1 && rd.run[0].index == 5 && rd.run[0].iter == 3 && !strcmp(rd.run[0].name, "fitname"), "run");
    ghf_em_state back;
    if (rd.n_run == 1 && ghf_ckpt_run_to_state(&rd.run[0], 10, &back) == 0) {
        CHECK(memcmp(back.cur.mu, st.cur.mu, d * sizeof(double)) == 0 && back.cur.b == st.cur.b &&
                  back.cur.p == st.cur.p && memcmp(back.trace, st.trace, 3 * sizeof(double)) == 0,
              "state not bitwise equal after the round trip");
        ghf_em_state_free(&back);
    }
    CHECK(rd.n_done == 1 && rd.done_index[0] == 3 && rd.done_off[1] == (int64_t)b.n &&
              memcmp(rd.done_blob, b.p, b.n) == 0, "done records");
    ghf_ckpt_free(&rd);
    ghf_ckpt prv;
    CHECK(ghf_ckpt_read(prev, &prv, err, sizeof err) == 0 && prv.n_run == 1 && prv.run[0].iter == 4,
          "the _prev file holds the first checkpoint");
    ghf_ckpt_free(&prv);
    /* a damaged main file: the loader falls back to _prev */
    FILE *f = fopen(path, "w");
    fputs("garbage", f);
    fclose(f);
    CHECK(ghf_ckpt_read(path, &rd, err, sizeof err) == 2, "garbage accepted");
    ghf_ckpt ld;
    CHECK(ghf_ckpt_load(MPI_COMM_WORLD, path, &id, &ld, err, sizeof err) == 0 && ld.n_run == 1 && ld.run[0].iter == 4,
          "load with fallback to _prev: %s", err);
    ghf_ckpt_free(&ld);
    /* identity mismatch */
    ghf_ckpt_id other = id;
    other.hash = 99;
    CHECK(ghf_ckpt_load(MPI_COMM_WORLD, prev, &other, &ld, err, sizeof err) == 2 && strstr(err, "other options"),
          "hash mismatch: %s", err);
    other = id;
    other.n_rows = 501;
    CHECK(ghf_ckpt_load(MPI_COMM_WORLD, prev, &other, &ld, err, sizeof err) == 2 && strstr(err, "500 x 2"),
          "N mismatch: %s", err);
    other = id;
    other.kind = "fit";
    CHECK(ghf_ckpt_load(MPI_COMM_WORLD, prev, &other, &ld, err, sizeof err) == 2 && strstr(err, "ghfit run"),
          "kind mismatch: %s", err);
    /* only ghfit's own checkpoints are removed: the garbage at path stays */
    ghf_ckpt_remove(path);
    CHECK(access(path, F_OK) == 0 && access(prev, F_OK) != 0, "remove");
    unlink(path);
    CHECK(ghf_ckpt_load(MPI_COMM_WORLD, path, &id, &ld, err, sizeof err) == 2 && strstr(err, "no such"), "missing: %s",
          err);
    ghf_pack_free(&b);
    ghf_ckpt_free(&c);
    ghf_em_state_free(&st);
    ghf_params_free(&t);
}

/* Fit names: %g labels kept where they differ; more digits only where two
 * values print alike; the job expansion names every fit apart. */
static void test_names(void)
{
    const double v[4] = {1e-8, 1.0000001e-8, 1e-6, 2.5e-7};
    char lab[4][GHF_JOB_LABEL_LEN];
    ghf_axis_labels(v, 4, lab);
    CHECK(!strcmp(lab[0], "1e-08") && !strcmp(lab[1], "1.0000001e-08") && !strcmp(lab[2], "1e-06") &&
              !strcmp(lab[3], "2.5e-07"), "labels %s %s %s %s", lab[0], lab[1], lab[2], lab[3]);
    const double w[2] = {0.123456789012, 0.123456789013};
    ghf_axis_labels(w, 2, lab);
    CHECK(!strcmp(lab[0], "0.123456789012") && !strcmp(lab[1], "0.123456789013"), "labels %s %s", lab[0], lab[1]);
    const char *txt = "data: d.h5\nout: o.h5\nfamily: gh\np: [free, 0.5, 0.500000001]\ntol: [1e-8, 1.00000001e-8]\n";
    ghf_job j;
    char err[1024];
    CHECK(ghf_job_parse(txt, strlen(txt), "n.yaml", &j, err, sizeof err) == 0, "parse: %s", err);
    ghf_fit_spec *sp = NULL;
    int ns = 0, nt = 0;
    CHECK(ghf_job_expand(&j, 100, &sp, &ns, &nt, err, sizeof err) == 0 && ns == 6, "expand: %s", err);
    for (int a = 0; a < ns; a++)
        for (int b = a + 1; b < ns; b++) CHECK(strcmp(sp[a].name, sp[b].name) != 0, "same name %s", sp[a].name);
    CHECK(ns == 6 && !strcmp(sp[0].name, "gh_pfree_tol1e-08_s1") && !strcmp(sp[1].name, "gh_pfree_tol1.00000001e-08_s1") &&
              !strcmp(sp[2].name, "gh_p0.5_tol1e-08_s1") && !strcmp(sp[4].name, "gh_p0.500000001_tol1e-08_s1"),
          "names %s %s %s %s", sp[0].name, sp[1].name, sp[2].name, sp[4].name);
    free(sp);
    ghf_job_free(&j);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_names();
    test_parse();
    test_errors();
    test_records();
    test_summary_order();
    char dir[] = "/tmp/ghf_test_job_XXXXXX";
    if (mkdtemp(dir)) {
        test_checkpoint_file(dir);
        rmdir(dir);
    } else {
        CHECK(0, "mkdtemp failed");
    }
    const int rc = test_summary("test_job");
    MPI_Finalize();
    return rc;
}
