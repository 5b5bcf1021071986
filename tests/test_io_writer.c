/* test_io_writer.c - the result-file writer (serial, one process): write two
 * fits, read everything back with the plain HDF5 API and check every name
 * of the layout contract (docs/output-schema.md), the description attribute
 * on every dataset, /summary through ghf_h5_read_fit_summary, and that
 * failed or aborted writes leave no file behind. */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, getpid, gmtime_r, mkdtemp */
#endif

/* standard headers */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* HDF5 */
#include <hdf5.h>

/* this module */
#include "h5io.h"

static int g_fail = 0, g_checks = 0;
static char g_dir[256];

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        g_checks++;                                                              \
        if (!(cond)) {                                                           \
            g_fail++;                                                            \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

/* Number of directory entries (other than . and ..) in g_dir. */
static int dir_entries(char *names, size_t n)
{
    DIR *d = opendir(g_dir);
    int k = 0;
    if (names && n) names[0] = '\0';
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        k++;
        if (names && strlen(names) + strlen(e->d_name) + 2 < n) {
            strcat(names, e->d_name);
            strcat(names, " ");
        }
    }
    if (d) closedir(d);
    return k;
}

/* Reads a scalar string attribute (fixed or variable length) into buf. */
static int attr_string(hid_t loc, const char *name, char *buf, size_t n)
{
    buf[0] = '\0';
    if (H5Aexists(loc, name) <= 0) return -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), t = H5Aget_type(a);
    int rc = -1;
    if (H5Tget_class(t) == H5T_STRING) {
        if (H5Tis_variable_str(t) > 0) {
            char *s = NULL;
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(t));
            if (H5Aread(a, mt, &s) >= 0 && s) {
                snprintf(buf, n, "%s", s);
                H5free_memory(s);
                rc = 0;
            }
            H5Tclose(mt);
        } else {
            size_t sz = H5Tget_size(t);
            char *s = (char *)calloc(sz + 1, 1);
            if (H5Aread(a, t, s) >= 0) {
                snprintf(buf, n, "%s", s);
                rc = 0;
            }
            free(s);
        }
    }
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

static int attr_num(hid_t loc, const char *name, double *v, H5T_class_t *cls)
{
    if (H5Aexists(loc, name) <= 0) return -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), t = H5Aget_type(a);
    *cls = H5Tget_class(t);
    int rc = (*cls == H5T_INTEGER || *cls == H5T_FLOAT) && H5Aread(a, H5T_NATIVE_DOUBLE, v) >= 0 ? 0 : -1;
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

/* Reads a float64 dataset of the expected shape (nd = 0 for scalars). */
static int read_f64(hid_t f, const char *name, int nd, const hsize_t *dims, double *out)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t s = H5Dget_space(ds), t = H5Dget_type(ds);
    int rc = -1;
    hsize_t got[4] = {0, 0, 0, 0};
    int gnd = H5Sget_simple_extent_ndims(s);
    H5Sget_simple_extent_dims(s, got, NULL);
    int same = gnd == nd && H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 8;
    for (int i = 0; same && i < nd; i++) same = got[i] == dims[i];
    if (same && (H5Sget_simple_extent_npoints(s) == 0 ||
                 H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0))
        rc = 0;
    H5Tclose(t);
    H5Sclose(s);
    H5Dclose(ds);
    return rc;
}

typedef struct visit_state {
    int n_datasets, n_described;
    char missing[512];
} visit_state;

static herr_t visit_cb(hid_t obj, const char *name, const H5O_info_t *info, void *op)
{
    visit_state *vs = (visit_state *)op;
    if (info->type != H5O_TYPE_DATASET) return 0;
    vs->n_datasets++;
    hid_t ds = H5Dopen2(obj, name, H5P_DEFAULT);
    char buf[256];
    if (attr_string(ds, "description", buf, sizeof buf) == 0 && strlen(buf) > 3)
        vs->n_described++;
    else if (strlen(vs->missing) + strlen(name) + 2 < sizeof vs->missing) {
        strcat(vs->missing, name);
        strcat(vs->missing, " ");
    }
    H5Dclose(ds);
    return 0;
}

/* --------------------------------------------------------------------------- */

#define D1 3
#define D2 2
#define NPH 7
#define NRK 2

static const char *phases[NPH] = {"read", "init", "estep", "allreduce", "mstep", "write", "total"};

static void fill_record(ghf_fit_record *r, const char *name, const char *family, int d, double *buf)
{
    /* buf: mu[d] gamma[d] sigma[d*d] mean[d] cov[d*d] trace[6] phase_s[NRK*NPH] */
    memset(r, 0, sizeof *r);
    double *mu = buf, *gamma = mu + d, *sigma = gamma + d, *mean = sigma + d * d, *cov = mean + d;
    double *trace = cov + d * d, *ps = trace + 6;
    for (int i = 0; i < d; i++) {
        mu[i] = 0.1 * (i + 1);
        gamma[i] = -0.05 * (i + 2);
        mean[i] = mu[i] + 1.5 * gamma[i];
        for (int j = 0; j < d; j++) {
            sigma[i * d + j] = (i == j) ? 1.0 + i : 0.1;
            cov[i * d + j] = 2.0 * sigma[i * d + j];
        }
    }
    for (int k = 0; k < 6; k++) trace[k] = -1000.0 + 10.0 * k - 1.0 / (k + 1);
    for (int k = 0; k < NRK * NPH; k++) ps[k] = 0.01 * (k + 1) + (k % 3) * 0.5;
    r->name = name;
    r->family = family;
    r->n_obs = 123456789012LL;
    r->d = d;
    r->n_iter = 5;
    r->converged = d == D1;
    r->status = d == D1 ? "converged" : "max_iter";
    r->loglik = trace[5];
    r->aic = -2 * trace[5] + 10;
    r->bic = -2 * trace[5] + 20;
    r->elapsed_s = 3.25;
    r->loglik_trace = trace;
    r->n_trace = 6;
    r->mu = mu;
    r->gamma = gamma;
    r->sigma = sigma;
    r->p = d == D1 ? 1.25 : -0.5;
    r->a = 2.0;
    r->b = 0.75;
    r->mean = mean;
    r->cov = cov;
    r->n_phases = NPH;
    r->phase_names = phases;
    r->n_ranks = NRK;
    r->phase_s = ps;
    r->backend = "cpu";
    r->n_dropped = 7;
}

static void check_fit(hid_t f, const ghf_fit_record *r)
{
    char gname[128], buf[512];
    snprintf(gname, sizeof gname, "/fits/%s", r->name);
    hid_t g = H5Gopen2(f, gname, H5P_DEFAULT);
    CHECK(g >= 0, "group %s", gname);
    if (g < 0) return;
    CHECK(attr_string(g, "family", buf, sizeof buf) == 0 && !strcmp(buf, r->family), "%s family '%s'", gname, buf);
    CHECK(attr_string(g, "status", buf, sizeof buf) == 0 && !strcmp(buf, r->status), "%s status '%s'", gname, buf);
    struct {
        const char *name;
        double want;
        H5T_class_t cls;
    } nums[] = {
        {"n_obs", (double)r->n_obs, H5T_INTEGER},  {"dim", r->d, H5T_INTEGER},
        {"n_iter", r->n_iter, H5T_INTEGER},        {"converged", r->converged, H5T_INTEGER},
        {"loglik", r->loglik, H5T_FLOAT},          {"aic", r->aic, H5T_FLOAT},
        {"bic", r->bic, H5T_FLOAT},                {"elapsed_s", r->elapsed_s, H5T_FLOAT},
        {"n_dropped", (double)r->n_dropped, H5T_INTEGER},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        double v = NAN;
        H5T_class_t cls = H5T_NO_CLASS;
        CHECK(attr_num(g, nums[i].name, &v, &cls) == 0 && v == nums[i].want && cls == nums[i].cls,
              "%s attr %s = %g (class %d), want %g", gname, nums[i].name, v, (int)cls, nums[i].want);
    }
    H5Gclose(g);

    const int d = r->d;
    double tmp[64];
    char p[160];
    hsize_t dims[2];
    dims[0] = (hsize_t)r->n_trace;
    snprintf(p, sizeof p, "%s/loglik", gname);
    CHECK(read_f64(f, p, 1, dims, tmp) == 0 && !memcmp(tmp, r->loglik_trace, r->n_trace * sizeof(double)), "%s", p);
    dims[0] = dims[1] = (hsize_t)d;
    const struct {
        const char *name;
        int nd;
        const double *want;
    } arrs[] = {{"params/mu", 1, r->mu},       {"params/gamma", 1, r->gamma}, {"params/sigma", 2, r->sigma},
                {"moments/mean", 1, r->mean}, {"moments/cov", 2, r->cov}};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", gname, arrs[i].name);
        size_t cnt = arrs[i].nd == 1 ? (size_t)d : (size_t)d * d;
        CHECK(read_f64(f, p, arrs[i].nd, dims, tmp) == 0 && !memcmp(tmp, arrs[i].want, cnt * sizeof(double)),
              "%s", p);
    }
    const struct {
        const char *name;
        double want;
    } sc[] = {{"params/p", r->p}, {"params/a", r->a}, {"params/b", r->b}};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", gname, sc[i].name);
        double v = NAN;
        CHECK(read_f64(f, p, 0, NULL, &v) == 0 && v == sc[i].want, "%s = %g", p, v);
    }

    /* profile */
    snprintf(p, sizeof p, "%s/profile/phase_names", gname);
    hid_t ds = H5Dopen2(f, p, H5P_DEFAULT);
    CHECK(ds >= 0, "%s", p);
    if (ds >= 0) {
        hid_t s = H5Dget_space(ds), t = H5Dget_type(ds);
        hsize_t n = 0;
        H5Sget_simple_extent_dims(s, &n, NULL);
        CHECK(n == (hsize_t)r->n_phases && H5Tget_class(t) == H5T_STRING, "%s shape/type", p);
        if (n == (hsize_t)r->n_phases && H5Tis_variable_str(t) > 0) {
            char *names[NPH];
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(t));
            CHECK(H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, names) >= 0, "%s read", p);
            for (int i = 0; i < r->n_phases; i++) CHECK(!strcmp(names[i], r->phase_names[i]), "phase %d", i);
            H5Dvlen_reclaim(mt, s, H5P_DEFAULT, names);
            H5Tclose(mt);
        }
        H5Tclose(t);
        H5Sclose(s);
        H5Dclose(ds);
    }
    snprintf(p, sizeof p, "%s/profile/seconds", gname);
    dims[0] = (hsize_t)r->n_ranks;
    dims[1] = (hsize_t)r->n_phases;
    CHECK(read_f64(f, p, 2, dims, tmp) == 0 &&
              !memcmp(tmp, r->phase_s, (size_t)r->n_ranks * r->n_phases * sizeof(double)),
          "%s", p);
    const char *agg[3] = {"min", "mean", "max"};
    for (int a = 0; a < 3; a++) {
        snprintf(p, sizeof p, "%s/profile/%s", gname, agg[a]);
        dims[0] = (hsize_t)r->n_phases;
        int ok = read_f64(f, p, 1, dims, tmp) == 0;
        for (int j = 0; ok && j < r->n_phases; j++) {
            double mn = INFINITY, mx = -INFINITY, sum = 0;
            for (int k = 0; k < r->n_ranks; k++) {
                double v = r->phase_s[k * r->n_phases + j];
                mn = fmin(mn, v);
                mx = fmax(mx, v);
                sum += v;
            }
            double want = a == 0 ? mn : a == 1 ? sum / r->n_ranks : mx;
            ok = fabs(tmp[j] - want) <= 1e-15 * fabs(want);
        }
        CHECK(ok, "%s", p);
    }
}

static void test_writer(void)
{
    char out[400], names[1024], err[512];
    snprintf(out, sizeof out, "%s/result.h5", g_dir);
    CHECK(ghf_h5_out_check(out, err, sizeof err) == 0, "out_check on a writable dir: %s", err);
    CHECK(dir_entries(NULL, 0) == 0, "out_check left files behind");

    ghf_out_meta m = {"0.1.0-test", "abc123def456", "ghfit fit --model gh data.h5", "cpu", NRK,
                      "model: gh\nmax_iter: 5\n", 2};
    ghf_h5_writer *w = ghf_h5_out_open(out, &m, err, sizeof err);
    CHECK(w != NULL, "out_open: %s", err);
    if (!w) return;
    double b1[200], b2[200];
    ghf_fit_record r1, r2;
    fill_record(&r1, "gh", "gh", D1, b1);
    fill_record(&r2, "nig", "nig", D2, b2);
    CHECK(ghf_h5_out_add_fit(w, &r1, err, sizeof err) == 0, "add gh: %s", err);
    CHECK(ghf_h5_out_add_fit(w, &r2, err, sizeof err) == 0, "add nig: %s", err);
    /* invalid records: status 2, nothing written */
    CHECK(ghf_h5_out_add_fit(w, &r1, err, sizeof err) == 2 && strstr(err, "already"), "duplicate: %s", err);
    ghf_fit_record bad = r2;
    bad.name = "t";
    bad.family = ""; /* vg was refused here before the family table: every name of it is valid now */
    CHECK(ghf_h5_out_add_fit(w, &bad, err, sizeof err) == 2 && strstr(err, "family"), "bad family: %s", err);
    bad.family = "gh";
    bad.name = "a/b";
    CHECK(ghf_h5_out_add_fit(w, &bad, err, sizeof err) == 2 && strstr(err, "name"), "bad name: %s", err);
    CHECK(access(out, F_OK) != 0, "final file exists before commit");
    /* the file is built in memory: nothing on disk before the commit */
    CHECK(dir_entries(names, sizeof names) == 0, "files before commit: %s", names);
    CHECK(ghf_h5_out_commit(w, err, sizeof err) == 0, "commit: %s", err);
    CHECK(dir_entries(names, sizeof names) == 1 && !strcmp(names, "result.h5 "), "after commit: %s", names);

    /* read back with the HDF5 API */
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0, "open result");
    if (f < 0) return;
    char buf[512];
    const struct {
        const char *name, *want;
    } rs[] = {{"ghfit_version", m.version}, {"git_commit", m.git_commit},
              {"command_line", m.command_line}, {"backend", m.backend}};
    for (int i = 0; i < 4; i++)
        CHECK(attr_string(f, rs[i].name, buf, sizeof buf) == 0 && !strcmp(buf, rs[i].want), "/ %s = '%s'",
              rs[i].name, buf);
    CHECK(attr_string(f, "created", buf, sizeof buf) == 0 && strlen(buf) == 20 && buf[4] == '-' && buf[10] == 'T' &&
              buf[19] == 'Z',
          "created '%s'", buf);
    double v;
    H5T_class_t cls;
    CHECK(attr_num(f, "n_ranks", &v, &cls) == 0 && v == NRK && cls == H5T_INTEGER, "n_ranks");
    {
        hid_t ds = H5Dopen2(f, "/config", H5P_DEFAULT), t = H5Dget_type(ds);
        char *s = NULL;
        CHECK(ds >= 0 && H5Tis_variable_str(t) > 0 && H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &s) >= 0 &&
                  s && !strcmp(s, m.config_text),
              "/config");
        if (s) H5free_memory(s);
        H5Tclose(t);
        H5Dclose(ds);
    }
    check_fit(f, &r1);
    check_fit(f, &r2);

    /* /summary: compound with the contract's field names */
    hid_t ds = H5Dopen2(f, "/summary", H5P_DEFAULT);
    CHECK(ds >= 0, "/summary");
    if (ds >= 0) {
        hid_t t = H5Dget_type(ds);
        const char *fields[] = {"name", "family", "n", "d", "loglik", "aic", "bic", "n_iter", "converged", "seconds",
                                "status"};
        CHECK(H5Tget_class(t) == H5T_COMPOUND && H5Tget_nmembers(t) == 11, "/summary type");
        for (int i = 0; i < 11; i++) CHECK(H5Tget_member_index(t, fields[i]) >= 0, "/summary field %s", fields[i]);
        H5Tclose(t);
        H5Dclose(ds);
    }

    /* every dataset has a description */
    visit_state vs;
    memset(&vs, 0, sizeof vs);
    H5Ovisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, visit_cb, &vs);
    /* per fit: loglik + 6 params + 2 moments + 5 profile = 14; plus /config and /summary */
    CHECK(vs.n_datasets == 2 * 14 + 2, "dataset count %d", vs.n_datasets);
    CHECK(vs.n_described == vs.n_datasets, "datasets without description: %s", vs.missing);
    H5Fclose(f);

    /* summary reader */
    ghf_fit_summary *rows = NULL;
    int nrows = 0;
    CHECK(ghf_h5_read_fit_summary(out, &rows, &nrows, err, sizeof err) == 0 && nrows == 2, "read summary: %s", err);
    const ghf_fit_record *recs[2] = {&r1, &r2};
    for (int i = 0; rows && i < nrows && i < 2; i++) {
        const ghf_fit_record *r = recs[i];
        CHECK(!strcmp(rows[i].name, r->name) && !strcmp(rows[i].family, r->family) && rows[i].n == r->n_obs &&
                  rows[i].d == r->d && rows[i].loglik == r->loglik && rows[i].aic == r->aic && rows[i].bic == r->bic &&
                  rows[i].n_iter == r->n_iter && rows[i].converged == r->converged && rows[i].seconds == r->elapsed_s &&
                  !strncmp(rows[i].status, r->status, sizeof rows[i].status - 1),
              "summary row %d", i);
    }
    free(rows);

    /* abort: nothing left, and an existing result at the final path is untouched */
    struct stat st0, st1;
    stat(out, &st0);
    w = ghf_h5_out_open(out, &m, err, sizeof err);
    CHECK(w != NULL, "reopen: %s", err);
    if (w) {
        CHECK(ghf_h5_out_add_fit(w, &r1, err, sizeof err) == 0, "add after reopen: %s", err);
        ghf_h5_out_abort(w);
    }
    stat(out, &st1);
    CHECK(dir_entries(names, sizeof names) == 1 && st0.st_ino == st1.st_ino && st0.st_size == st1.st_size,
          "abort left: %s", names);
    char out2[400];
    snprintf(out2, sizeof out2, "%s/aborted.h5", g_dir);
    w = ghf_h5_out_open(out2, NULL, err, sizeof err);
    CHECK(w != NULL, "open with NULL meta: %s", err);
    ghf_h5_out_abort(w);
    ghf_h5_out_abort(NULL);
    CHECK(dir_entries(names, sizeof names) == 1, "abort left: %s", names);

    /* an empty result (no fits) is still valid */
    w = ghf_h5_out_open(out2, &m, err, sizeof err);
    CHECK(w && ghf_h5_out_commit(w, err, sizeof err) == 0, "empty commit: %s", err);
    CHECK(ghf_h5_read_fit_summary(out2, &rows, &nrows, err, sizeof err) == 0 && nrows == 0 && !rows,
          "empty summary: %s", err);
    unlink(out2);
    unlink(out);
}

static void test_failures(void)
{
    char err[512], plain[400], under[500], names[512];
    snprintf(plain, sizeof plain, "%s/plainfile", g_dir);
    FILE *fp = fopen(plain, "w");
    fputs("not a directory\n", fp);
    fclose(fp);
    snprintf(under, sizeof under, "%s/out.h5", plain);
    const char *paths[] = {"/proc/forbidden/out.h5", "/proc/out.h5", under, g_dir, "/nonexistent-dir-ghf/out.h5", ""};
    for (int i = 0; i < 6; i++) {
        err[0] = '\0';
        int st = ghf_h5_out_check(paths[i], err, sizeof err);
        CHECK(st == 2 && (!*paths[i] || strstr(err, paths[i])) && !strchr(err, '\n'), "out_check('%s') = %d: %s",
              paths[i], st, err);
        printf("  ok: out_check %-30s -> %s\n", i == 2 ? "(path under a file)" : paths[i], err);
        ghf_h5_writer *w = ghf_h5_out_open(paths[i], NULL, err, sizeof err);
        CHECK(w == NULL && err[0], "out_open('%s') should fail", paths[i]);
        ghf_h5_out_abort(w);
    }
    CHECK(access("/proc/forbidden", F_OK) != 0, "/proc/forbidden created");
    CHECK(dir_entries(names, sizeof names) == 1 && !strcmp(names, "plainfile "), "failures left: %s", names);
    unlink(plain);

    /* summary reader on bad input */
    ghf_fit_summary *rows = (ghf_fit_summary *)1;
    int n = -1;
    CHECK(ghf_h5_read_fit_summary("/nonexistent-ghf.h5", &rows, &n, err, sizeof err) == 2 && !rows && n == 0,
          "summary of missing file: %s", err);
    snprintf(plain, sizeof plain, "%s/noresult.h5", g_dir);
    hid_t f = H5Fcreate(plain, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    CHECK(ghf_h5_read_fit_summary(plain, &rows, &n, err, sizeof err) == 2 && strstr(err, "/summary"),
          "summary of a non-result file: %s", err);
    unlink(plain);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/ghf_test_io_writer_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_writer();
    test_failures();
    if (g_fail == 0) {
        rmdir(g_dir);
    } else {
        fprintf(stderr, "files kept in %s\n", g_dir);
    }
    printf("test_io_writer: %d checks, %d failures\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
