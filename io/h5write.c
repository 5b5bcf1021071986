/* h5write.c - the result file (layout: docs/output-schema.md).
 *
 * Built by ONE process (rank 0) in memory (HDF5's core driver: no HDF5 call
 * ever writes to disk, see ghf__h5_mem_save); ghf_h5_out_commit writes
 * /summary, saves the image to "<out>.tmp.<pid>" in the output directory
 * (plain POSIX writes, fsync'ed) and renames it into place, so a failed run
 * -- a full disk included -- never leaves a partial file at the final path
 * nor a temporary one.  ghf_h5_read_fit_summary reads /summary back (for
 * `ghfit summary` and the tests). */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, getpid, gmtime_r, mkdtemp */
#endif

/* standard headers */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* this module */
#include "h5internal.h"

struct ghf_h5_writer {
    char            *final_path;
    char            *tmp_path;
    hid_t            f;
    ghf__memfile    *mf;
    hid_t            fits;
    int              n_fits, cap;
    ghf_fit_summary *rows;
};

/* ---------------------------------------------------------------------------
 * Dataset helpers: every dataset gets a `description` attribute.
 * ------------------------------------------------------------------------- */

static int write_ds(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank,
                    const hsize_t *dims, const void *data, const char *desc)
{
    hid_t s = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, NULL);
    if (s < 0) return -1;
    /* small datasets (parameters, traces, profiles) live in the object
     * header (compact layout): one metadata write instead of a separate raw
     * data block, which keeps sweeps of thousands of fits cheap to write */
    hid_t dcpl = H5P_DEFAULT;
    const hssize_t np0 = H5Sget_simple_extent_npoints(s);
    if (np0 > 0 && (size_t)np0 * H5Tget_size(ftype) <= 16384 && !H5Tis_variable_str(ftype)) {
        dcpl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_layout(dcpl, H5D_COMPACT);
    }
    hid_t ds = H5Dcreate2(loc, name, ftype, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dcpl != H5P_DEFAULT) H5Pclose(dcpl);
    int rc = -1;
    if (ds >= 0) {
        hssize_t npts = H5Sget_simple_extent_npoints(s);
        rc = 0;
        if (npts > 0 && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) rc = -1;
        if (rc == 0 && ghf__attr_str(ds, "description", desc) < 0) rc = -1;
        if (H5Dclose(ds) < 0) rc = -1;
    }
    H5Sclose(s);
    return rc;
}

static int write_f64(hid_t loc, const char *name, int rank, const hsize_t *dims,
                     const double *data, const char *desc)
{
    return write_ds(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, rank, dims, data, desc);
}

static int write_scalar(hid_t loc, const char *name, double v, const char *desc)
{
    return write_f64(loc, name, 0, NULL, &v, desc);
}

static hid_t vlen_str_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0) {
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
    }
    return t;
}

/* n strings (n >= 0) as a 1-D variable-length string dataset. */
static int write_strings(hid_t loc, const char *name, int n, const char *const *v, const char *desc)
{
    hid_t t = vlen_str_type();
    if (t < 0) return -1;
    hsize_t dim = (hsize_t)n;
    int rc = write_ds(loc, name, t, t, 1, &dim, v, desc);
    H5Tclose(t);
    return rc;
}

static int write_string(hid_t loc, const char *name, const char *v, const char *desc)
{
    hid_t t = vlen_str_type();
    if (t < 0) return -1;
    int rc = write_ds(loc, name, t, t, 0, NULL, &v, desc);
    H5Tclose(t);
    return rc;
}

static hid_t make_group(hid_t loc, const char *name, const char *desc)
{
    hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g >= 0 && desc && ghf__attr_str(g, "description", desc) < 0) {
        H5Gclose(g);
        return -1;
    }
    return g;
}

/* An attribute holding n strings (1-D, variable length; large ones go to the
 * dense attribute storage of the 1.8 format the result file uses). */
static int attr_strings(hid_t loc, const char *name, int n, const char *const *v)
{
    hid_t t = vlen_str_type();
    hsize_t dim = (hsize_t)n;
    hid_t s = H5Screate_simple(1, &dim, NULL);
    int rc = -1;
    if (t >= 0 && s >= 0) {
        hid_t a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
            rc = H5Awrite(a, t, v) < 0 ? -1 : 0;
            if (H5Aclose(a) < 0) rc = -1;
        }
    }
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    return rc;
}

/* /fits/<name>/se/ and /fits/<name>/param_cov (docs/output-schema.md) */
static int write_se(hid_t g, const ghf_fit_record *r)
{
    const ghf_fit_se *e = r->se;
    const int d = r->d;
    const size_t dd = (size_t)d * d;
    const hsize_t d1 = (hsize_t)d, d2[2] = {(hsize_t)d, (hsize_t)d};
    double *nan = (double *)malloc(dd * sizeof(double));
    if (!nan) return -1;
    for (size_t i = 0; i < dd; i++) nan[i] = NAN;
    hid_t gs = make_group(g, "se", "standard errors from the observed information at the fitted point: the parameters "
                                   "of params/ in its |Sigma| = 1 gauge (0 for fixed ones), and the gauge-free mean, "
                                   "cov (of X) and sqrt_ab; NaN where not available (attribute reason)");
    int bad = gs < 0;
    if (gs >= 0) {
        bad |= write_f64(gs, "mu", 1, &d1, e->mu ? e->mu : nan, "SE of mu") < 0;
        bad |= write_f64(gs, "gamma", 1, &d1, e->gamma ? e->gamma : nan, "SE of gamma (0: held at 0)") < 0;
        bad |= write_f64(gs, "sigma", 2, d2, e->sigma ? e->sigma : nan, "SE of Sigma (|Sigma| = 1 gauge)") < 0;
        bad |= write_scalar(gs, "p", e->p, "SE of p (0: p fixed by the family or the user)") < 0;
        bad |= write_scalar(gs, "a", e->a, "SE of a (0 on the family's face a = 0)") < 0;
        bad |= write_scalar(gs, "b", e->b, "SE of b (0 on the family's face b = 0)") < 0;
        bad |= write_f64(gs, "mean", 1, &d1, e->mean ? e->mean : nan, "SE of E[X] (gauge-free)") < 0;
        bad |= write_f64(gs, "cov", 2, d2, e->cov ? e->cov : nan, "SE of Cov[X] (gauge-free)") < 0;
        bad |= write_scalar(gs, "sqrt_ab", e->sqrt_ab, "SE of sqrt(a b) (gauge-free)") < 0;
        bad |= ghf__attr_str(gs, "method", e->method ? e->method : "none") < 0;
        bad |= ghf__attr_str(gs, "reason", e->reason ? e->reason : "") < 0;
        bad |= ghf__attr_f64(gs, "condition_number", e->cond) < 0;
        bad |= ghf__attr_f64(gs, "newton_decrement", e->newton_decrement) < 0;
        bad |= ghf__attr_f64(gs, "seconds", e->seconds) < 0;
        bad |= ghf__attr_int(gs, "n_params", e->n_cov) < 0;
        /* the SE pass runs on the host CPUs whatever the fit's backend (docs/design.md) */
        bad |= ghf__attr_str(gs, "computed_on", "cpu") < 0;
        bad |= H5Gclose(gs) < 0;
    }
    free(nan);
    if (bad || e->n_cov <= 0 || !e->param_cov || !e->names) return bad ? -1 : 0;
    /* the row names: split the '\n'-terminated list */
    char *buf = strdup(e->names);
    const char **nm = (const char **)malloc((size_t)e->n_cov * sizeof *nm);
    int n = 0;
    if (buf && nm)
        for (char *p = buf, *q; n < e->n_cov && (q = strchr(p, '\n')) != NULL; p = q + 1) {
            *q = '\0';
            nm[n++] = p;
        }
    const hsize_t k2[2] = {(hsize_t)e->n_cov, (hsize_t)e->n_cov};
    bad = !buf || !nm || n != e->n_cov;
    if (!bad)
        bad |= write_f64(g, "param_cov", 2, k2, e->param_cov,
                         "covariance of the estimates of the free parameters (rows: attribute names; |Sigma| = 1 gauge, "
                         "so singular in the direction of log|Sigma|)") < 0;
    if (!bad) {
        hid_t ds = H5Dopen2(g, "param_cov", H5P_DEFAULT);
        bad = ds < 0 || attr_strings(ds, "names", n, nm) < 0;
        if (ds >= 0) bad |= H5Dclose(ds) < 0;
    }
    free(buf);
    free(nm);
    return bad ? -1 : 0;
}

/* The /summary row type (memory layout = ghf_fit_summary). */
static hid_t summary_type(void)
{
    hid_t sname = H5Tcopy(H5T_C_S1), sfam = H5Tcopy(H5T_C_S1), sst = H5Tcopy(H5T_C_S1);
    H5Tset_size(sname, sizeof(((ghf_fit_summary *)0)->name));
    H5Tset_size(sfam, sizeof(((ghf_fit_summary *)0)->family));
    H5Tset_size(sst, sizeof(((ghf_fit_summary *)0)->status));
    H5Tset_strpad(sname, H5T_STR_NULLTERM);
    H5Tset_strpad(sfam, H5T_STR_NULLTERM);
    H5Tset_strpad(sst, H5T_STR_NULLTERM);
    H5Tset_cset(sname, H5T_CSET_UTF8);
    H5Tset_cset(sfam, H5T_CSET_UTF8);
    H5Tset_cset(sst, H5T_CSET_UTF8);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(ghf_fit_summary));
    H5Tinsert(t, "name", HOFFSET(ghf_fit_summary, name), sname);
    H5Tinsert(t, "family", HOFFSET(ghf_fit_summary, family), sfam);
    H5Tinsert(t, "n", HOFFSET(ghf_fit_summary, n), H5T_NATIVE_INT64);
    H5Tinsert(t, "d", HOFFSET(ghf_fit_summary, d), H5T_NATIVE_INT);
    H5Tinsert(t, "loglik", HOFFSET(ghf_fit_summary, loglik), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "aic", HOFFSET(ghf_fit_summary, aic), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "bic", HOFFSET(ghf_fit_summary, bic), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "n_iter", HOFFSET(ghf_fit_summary, n_iter), H5T_NATIVE_INT);
    H5Tinsert(t, "converged", HOFFSET(ghf_fit_summary, converged), H5T_NATIVE_INT);
    H5Tinsert(t, "seconds", HOFFSET(ghf_fit_summary, seconds), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "status", HOFFSET(ghf_fit_summary, status), sst);
    H5Tclose(sname);
    H5Tclose(sfam);
    H5Tclose(sst);
    return t;
}

/* ---------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------- */

int ghf_h5_out_check(const char *final_path, char *err, size_t errlen)
{
    return ghf__check_writable(final_path, err, errlen);
}

int ghf_h5_out_check_access(const char *final_path, char *err, size_t errlen)
{
    return ghf__check_writable_mode(final_path, 0, err, errlen);
}

static void writer_free(ghf_h5_writer *w)
{
    if (!w) return;
    free(w->final_path);
    ghf__tmp_release(w->tmp_path);
    free(w->rows);
    free(w);
}

/* Closes the HDF5 handles (in memory: nothing on disk yet). */
static void writer_discard(ghf_h5_writer *w)
{
    if (w->fits >= 0) H5Gclose(w->fits);
    if (w->f >= 0) ghf__h5_mem_discard(w->f, w->mf);
    w->fits = w->f = -1;
    w->mf = NULL;
}

ghf_h5_writer *ghf_h5_out_open(const char *final_path, const ghf_out_meta *m, char *err, size_t errlen)
{
    ghf__h5_quiet();
    if (ghf__check_writable(final_path, err, errlen) != 0) return NULL;
    ghf_h5_writer *w = (ghf_h5_writer *)calloc(1, sizeof *w);
    if (!w) {
        ghf__seterr(err, errlen, "%s: out of memory", final_path);
        return NULL;
    }
    w->f = w->fits = -1;
    w->final_path = strdup(final_path);
    if (!w->final_path) {
        ghf__seterr(err, errlen, "%s: out of memory", final_path);
        writer_free(w);
        return NULL;
    }
    /* 1.8-format groups (link-info indexed, compact attribute storage) keep
     * adding the 2,000th fit of a sweep as cheap as the first; every HDF5
     * >= 1.8 (h5py, R hdf5r, MATLAB) reads them. */
    w->f = ghf__h5_mem_create(final_path, H5F_LIBVER_V18, &w->mf);
    if (w->f < 0) {
        ghf__seterr(err, errlen, "%s: cannot create the result file in memory", final_path);
        writer_free(w);
        return NULL;
    }

    char created[32];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    ghf_out_meta empty;
    memset(&empty, 0, sizeof empty);
    if (!m) m = &empty;
    int bad = 0;
    bad |= ghf__attr_str(w->f, "ghfit_version", m->version ? m->version : "unknown") < 0;
    bad |= ghf__attr_str(w->f, "git_commit", m->git_commit ? m->git_commit : "unknown") < 0;
    bad |= ghf__attr_str(w->f, "created", created) < 0;
    bad |= ghf__attr_str(w->f, "command_line", m->command_line ? m->command_line : "") < 0;
    bad |= ghf__attr_int(w->f, "n_ranks", m->n_ranks) < 0;
    if (m->omp_threads > 0) bad |= ghf__attr_int(w->f, "omp_threads", m->omp_threads) < 0;
    bad |= ghf__attr_str(w->f, "backend", m->backend ? m->backend : "") < 0;
    if (!bad && m->slice) {
        bad |= ghf__attr_str(w->f, "slice", m->slice) < 0;
        bad |= ghf__attr_str(w->f, "job_hash", m->job_hash ? m->job_hash : "") < 0;
        bad |= ghf__attr_i64(w->f, "n_fits_total", m->n_fits_total) < 0;
    }
    if (!bad && m->config_text)
        bad |= write_string(w->f, "config", m->config_text,
                            "effective configuration of the run (YAML text)") < 0;
    if (!bad) {
        w->fits = make_group(w->f, "fits", "one group per fitted model, named by the fit");
        bad |= w->fits < 0;
    }
    if (bad) {
        ghf__seterr(err, errlen, "%s: writing the file header failed (out of memory?)", final_path);
        writer_discard(w);
        writer_free(w);
        return NULL;
    }
    return w;
}

static int check_record(const ghf_h5_writer *w, const ghf_fit_record *r, char *err, size_t errlen)
{
    const char *fp = w->final_path;
    if (!r) {
        ghf__seterr(err, errlen, "%s: no fit record given", fp);
        return 2;
    }
    if (!r->name || !*r->name || strchr(r->name, '/') || !strcmp(r->name, ".") ||
        strlen(r->name) >= sizeof(((ghf_fit_summary *)0)->name)) {
        ghf__seterr(err, errlen, "%s: invalid fit name '%s' (1-63 characters, no '/')", fp,
                    r->name ? r->name : "(null)");
        return 2;
    }
    if (!r->family || !*r->family || strlen(r->family) >= sizeof(((ghf_fit_summary *)0)->family)) {
        ghf__seterr(err, errlen, "%s:/fits/%s: the record has no family name (1-15 characters)", fp, r->name);
        return 2;
    }
    if (r->d < 1 || !r->mu || !r->gamma || !r->sigma) {
        ghf__seterr(err, errlen, "%s:/fits/%s: record needs d >= 1 and mu, gamma, sigma", fp, r->name);
        return 2;
    }
    if (r->n_trace < 0 || (r->n_trace > 0 && !r->loglik_trace)) {
        ghf__seterr(err, errlen, "%s:/fits/%s: invalid log-likelihood trace", fp, r->name);
        return 2;
    }
    if (r->n_components > 1 && (!r->mix_prop || !r->mix_mu || !r->mix_gamma || !r->mix_sigma || !r->mix_pab ||
                                !r->mix_mean || !r->mix_cov || r->n_starts < 1 || !r->start_ll || !r->start_iter ||
                                !r->start_conv)) {
        ghf__seterr(err, errlen, "%s:/fits/%s: invalid mixture record", fp, r->name);
        return 2;
    }
    if (r->n_phases < 0 || (r->n_phases > 0 && (!r->phase_names || r->n_ranks < 1 || !r->phase_s))) {
        ghf__seterr(err, errlen, "%s:/fits/%s: invalid profile (phases, ranks or seconds missing)", fp, r->name);
        return 2;
    }
    for (int i = 0; i < r->n_phases; i++)
        if (!r->phase_names[i]) {
            ghf__seterr(err, errlen, "%s:/fits/%s: phase name %d missing", fp, r->name, i);
            return 2;
        }
    for (int i = 0; i < w->n_fits; i++)
        if (!strcmp(w->rows[i].name, r->name)) {
            ghf__seterr(err, errlen, "%s:/fits/%s: a fit with this name was already added", fp, r->name);
            return 2;
        }
    return 0;
}

static int write_i32(hid_t loc, const char *name, int n, const int *v, const char *desc)
{
    const hsize_t dim = (hsize_t)n;
    return write_ds(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT, 1, &dim, v, desc);
}

/* A mixture's blocks (docs/output-schema.md "Mixtures"): proportions,
 * components/<k>/{params,moments}, starts/.  -1 on an HDF5 error. */
static int write_mixture(hid_t g, const ghf_fit_record *r)
{
    const int d = r->d, K = r->n_components;
    const size_t dd = (size_t)d * d;
    const hsize_t d1 = (hsize_t)d, d2[2] = {(hsize_t)d, (hsize_t)d}, k1 = (hsize_t)K;
    int bad = 0;
    bad |= ghf__attr_int(g, "n_components", K) < 0;
    bad |= ghf__attr_f64(g, "icl", r->icl) < 0;
    bad |= write_f64(g, "proportions", 1, &k1, r->mix_prop, "mixing proportions pi_k (sum 1; by decreasing proportion)") < 0;
    hid_t gc = make_group(g, "components", "the mixture's components k = 0 .. K-1, each as a single fit's params/ and moments/");
    bad |= gc < 0;
    for (int k = 0; k < K && gc >= 0 && !bad; k++) {
        char nm[24];
        snprintf(nm, sizeof nm, "%d", k);
        hid_t ck = make_group(gc, nm, "one component: its parameters and moments");
        bad |= ck < 0;
        if (ck < 0) break;
        hid_t gp = make_group(ck, "params", "fitted parameters: X = mu + gamma*Y + sqrt(Y)*A*Z, Y ~ GIG(p, a, b), sigma = A*A^T");
        bad |= gp < 0;
        if (gp >= 0) {
            bad |= write_f64(gp, "mu", 1, &d1, r->mix_mu + (size_t)k * d, "location vector mu") < 0;
            bad |= write_f64(gp, "gamma", 1, &d1, r->mix_gamma + (size_t)k * d, "skewness vector gamma") < 0;
            bad |= write_f64(gp, "sigma", 2, d2, r->mix_sigma + (size_t)k * dd, "dispersion matrix Sigma (row-major d x d)") < 0;
            bad |= write_scalar(gp, "p", r->mix_pab[3 * k], "GIG index parameter p (lambda); -1/2 for NIG") < 0;
            bad |= write_scalar(gp, "a", r->mix_pab[3 * k + 1], "GIG parameter a (multiplies y; psi of ghyp)") < 0;
            bad |= write_scalar(gp, "b", r->mix_pab[3 * k + 2], "GIG parameter b (multiplies 1/y; chi of ghyp)") < 0;
            bad |= H5Gclose(gp) < 0;
        }
        hid_t gm = make_group(ck, "moments", "moments of the component's law");
        bad |= gm < 0;
        if (gm >= 0) {
            if (r->mix_note && r->mix_note[k]) bad |= ghf__attr_str(gm, "reason", r->mix_note[k]) < 0;
            bad |= write_f64(gm, "mean", 1, &d1, r->mix_mean + (size_t)k * d, "mean vector E[X] of the component (NaN if undefined)") < 0;
            bad |= write_f64(gm, "cov", 2, d2, r->mix_cov + (size_t)k * dd, "covariance matrix Cov[X] of the component (NaN if undefined)") < 0;
            bad |= H5Gclose(gm) < 0;
        }
        bad |= H5Gclose(ck) < 0;
    }
    if (gc >= 0) bad |= H5Gclose(gc) < 0;
    hid_t gs = make_group(g, "starts", "every initialisation of the mixture EM (the fit is the best finite one)");
    bad |= gs < 0;
    if (gs >= 0) {
        const hsize_t s1 = (hsize_t)r->n_starts;
        bad |= write_f64(gs, "loglik", 1, &s1, r->start_ll, "final log-likelihood of each start (NaN: it collapsed)") < 0;
        bad |= write_i32(gs, "n_iter", r->n_starts, r->start_iter, "EM iterations of each start") < 0;
        bad |= write_i32(gs, "converged", r->n_starts, r->start_conv, "1 if the start converged") < 0;
        bad |= H5Gclose(gs) < 0;
    }
    return bad ? -1 : 0;
}

int ghf_h5_out_add_fit(ghf_h5_writer *w, const ghf_fit_record *r, char *err, size_t errlen)
{
    if (!w || w->f < 0) {
        ghf__seterr(err, errlen, "result writer is not open");
        return 2;
    }
    int st = check_record(w, r, err, errlen);
    if (st) return st;
    ghf__h5_quiet();
    if (w->n_fits == w->cap) {
        int nc = w->cap ? 2 * w->cap : 4;
        ghf_fit_summary *nr = (ghf_fit_summary *)realloc(w->rows, (size_t)nc * sizeof *nr);
        if (!nr) {
            ghf__seterr(err, errlen, "%s:/fits/%s: out of memory", w->final_path, r->name);
            return 1;
        }
        w->rows = nr;
        w->cap = nc;
    }

    const int d = r->d;
    const hsize_t dd[2] = {(hsize_t)d, (hsize_t)d};
    double *nanbuf = NULL, *stats = NULL;
    hid_t g = -1, gp = -1, gm = -1, gprof = -1;
    int bad = 0;
    g = make_group(w->fits, r->name, "one fitted model: attributes, EM trace, parameters, moments, profile");
    if (g < 0) {
        ghf__seterr(err, errlen, "%s:/fits/%s: cannot create the group", w->final_path, r->name);
        return 1;
    }
    bad |= ghf__attr_str(g, "family", r->family) < 0;
    bad |= ghf__attr_i64(g, "n_obs", r->n_obs) < 0;
    bad |= ghf__attr_int(g, "dim", d) < 0;
    bad |= ghf__attr_int(g, "n_iter", r->n_iter) < 0;
    bad |= ghf__attr_int(g, "converged", r->converged ? 1 : 0) < 0;
    bad |= ghf__attr_str(g, "status", r->status ? r->status : "") < 0;
    bad |= ghf__attr_f64(g, "loglik", r->loglik) < 0;
    bad |= ghf__attr_f64(g, "aic", r->aic) < 0;
    bad |= ghf__attr_f64(g, "bic", r->bic) < 0;
    bad |= ghf__attr_f64(g, "elapsed_s", r->elapsed_s) < 0;
    bad |= ghf__attr_i64(g, "n_dropped", r->n_dropped) < 0;
    bad |= ghf__attr_int(g, "symmetric", r->symmetric ? 1 : 0) < 0;
    if (r->D) { /* the factor form (a full-form fit has neither attribute: readers take it as full) */
        bad |= ghf__attr_str(g, "sigma_structure", r->factors > 0 ? "factor" : "diag") < 0;
        bad |= ghf__attr_int(g, "factors", r->factors) < 0;
    }
    if (r->data_file) {
        bad |= ghf__attr_str(g, "data_file", r->data_file) < 0;
        bad |= ghf__attr_str(g, "dataset", r->dataset ? r->dataset : "/X") < 0;
        bad |= ghf__attr_i64(g, "row_start", r->row_start) < 0;
        bad |= ghf__attr_i64(g, "row_count", r->row_count) < 0;
    }
    bad |= ghf__attr_f64(g, "p_fixed", r->p_fixed) < 0;
    if (r->backend) bad |= ghf__attr_str(g, "backend", r->backend) < 0;
    if (r->device) bad |= ghf__attr_str(g, "device", r->device) < 0;
    if (r->weights) {
        bad |= ghf__attr_str(g, "weights", r->weights) < 0;
        bad |= ghf__attr_f64(g, "weight_sum", r->weight_sum) < 0;
        bad |= ghf__attr_f64(g, "n_eff", r->n_eff) < 0;
        bad |= ghf__attr_f64(g, "loglik_unweighted", r->loglik_unweighted) < 0;
    }
    if (r->missing) {
        bad |= ghf__attr_str(g, "missing", r->missing) < 0;
        bad |= ghf__attr_i64(g, "n_incomplete", r->n_incomplete) < 0;
        bad |= ghf__attr_f64(g, "missing_fraction", r->missing_fraction) < 0;
        if (r->missing_counts) {
            hsize_t nc = (hsize_t)r->n_missing_counts;
            bad |= write_f64(g, "missing_counts", 1, &nc, r->missing_counts,
                             "rows with k = 0, 1, ..., d missing entries (--missing em)") < 0;
        }
    }
    {
        hsize_t nt = (hsize_t)r->n_trace;
        bad |= write_f64(g, "loglik", 1, &nt, r->loglik_trace,
                         "log-likelihood after each EM iteration (entry 0: initial parameters)") < 0;
    }

    const int mixture = r->n_components > 1;
    if (mixture) bad |= write_mixture(g, r) < 0;
    else {
        gp = make_group(g, "params", "fitted parameters: X = mu + gamma*Y + sqrt(Y)*A*Z, Y ~ GIG(p, a, b), sigma = A*A^T");
        bad |= gp < 0;
    }
    if (gp >= 0) {
        hsize_t d1 = (hsize_t)d;
        bad |= write_f64(gp, "mu", 1, &d1, r->mu, "location vector mu") < 0;
        bad |= write_f64(gp, "gamma", 1, &d1, r->gamma, "skewness vector gamma") < 0;
        if (!r->D || d <= GHF_SIGMA_WRITE_MAX_D)
            bad |= write_f64(gp, "sigma", 2, dd, r->sigma,
                             r->D ? "dispersion matrix Sigma = B B' + D (row-major d x d; written for d <= 1000)"
                                  : "dispersion matrix Sigma (row-major d x d)") < 0;
        if (r->D) {
            hsize_t db[2] = {(hsize_t)d, (hsize_t)r->factors};
            if (r->factors > 0)
                bad |= write_f64(gp, "B", 2, db, r->B, "factor loadings B (d x factors, row-major): Sigma = B B' + diag(D)") < 0;
            bad |= write_f64(gp, "D", 1, dd, r->D, "specific variances: the diagonal D of Sigma = B B' + diag(D)") < 0;
        }
        bad |= write_scalar(gp, "p", r->p, "GIG index parameter p (lambda); -1/2 for NIG") < 0;
        bad |= write_scalar(gp, "a", r->a, "GIG parameter a (multiplies y: density ~ y^(p-1) exp(-(a*y + b/y)/2); psi of ghyp)") < 0;
        bad |= write_scalar(gp, "b", r->b, "GIG parameter b (multiplies 1/y; chi of ghyp)") < 0;
    }

    gm = make_group(g, "moments", "moments of the fitted distribution");
    bad |= gm < 0;
    if (gm >= 0 && r->moments_note) bad |= ghf__attr_str(gm, "reason", r->moments_note) < 0;
    if (gm >= 0) {
        hsize_t d1 = (hsize_t)d;
        const double *mean = r->mean, *cov = r->cov;
        if (!mean || !cov) {
            nanbuf = (double *)malloc((size_t)d * (size_t)d * sizeof(double));
            if (nanbuf)
                for (size_t i = 0; i < (size_t)d * (size_t)d; i++) nanbuf[i] = NAN;
            if (!mean) mean = nanbuf;
            if (!cov) cov = nanbuf;
        }
        if (!mean || !cov) bad = 1;
        else {
            bad |= write_f64(gm, "mean", 1, &d1, mean, "mean vector E[X] of the fitted law (NaN if undefined)") < 0;
            if (!r->D || d <= GHF_SIGMA_WRITE_MAX_D)
                bad |= write_f64(gm, "cov", 2, dd, cov, "covariance matrix Cov[X] of the fitted law (NaN if undefined)") < 0;
        }
    }

    if (r->se) bad |= write_se(g, r) < 0;

    gprof = make_group(g, "profile", "wall-clock seconds per phase and rank");
    bad |= gprof < 0;
    if (gprof >= 0) {
        const int np = r->n_phases, nr = np > 0 ? r->n_ranks : 0;
        hsize_t sdims[2] = {(hsize_t)nr, (hsize_t)np};
        hsize_t pdim = (hsize_t)np;
        bad |= write_strings(gprof, "phase_names", np, r->phase_names, "names of the profiled phases") < 0;
        bad |= write_f64(gprof, "seconds", 2, sdims, r->phase_s, "wall seconds [rank][phase]") < 0;
        stats = (double *)malloc(3 * (size_t)(np > 0 ? np : 1) * sizeof(double));
        if (!stats) bad = 1;
        else {
            double *mn = stats, *me = stats + np, *mx = stats + 2 * np;
            for (int j = 0; j < np; j++) {
                mn[j] = INFINITY;
                mx[j] = -INFINITY;
                me[j] = 0.0;
                for (int k = 0; k < nr; k++) {
                    double v = r->phase_s[(size_t)k * np + j];
                    mn[j] = v < mn[j] ? v : mn[j];
                    mx[j] = v > mx[j] ? v : mx[j];
                    me[j] += v;
                }
                me[j] /= nr;
            }
            bad |= write_f64(gprof, "min", 1, &pdim, mn, "minimum over ranks of wall seconds per phase") < 0;
            bad |= write_f64(gprof, "mean", 1, &pdim, me, "mean over ranks of wall seconds per phase") < 0;
            bad |= write_f64(gprof, "max", 1, &pdim, mx, "maximum over ranks of wall seconds per phase") < 0;
        }
    }
    free(nanbuf);
    free(stats);
    if (gprof >= 0) bad |= H5Gclose(gprof) < 0;
    if (gm >= 0) bad |= H5Gclose(gm) < 0;
    if (gp >= 0) bad |= H5Gclose(gp) < 0;
    bad |= H5Gclose(g) < 0;
    if (bad) {
        ghf__seterr(err, errlen, "%s:/fits/%s: writing the fit failed (out of memory?)", w->final_path, r->name);
        return 1;
    }

    ghf_fit_summary *row = &w->rows[w->n_fits++];
    memset(row, 0, sizeof *row);
    strncpy(row->name, r->name, sizeof row->name - 1);
    strncpy(row->family, r->family, sizeof row->family - 1);
    row->n = r->n_obs;
    row->d = d;
    row->loglik = r->loglik;
    row->aic = r->aic;
    row->bic = r->bic;
    row->n_iter = r->n_iter;
    row->converged = r->converged ? 1 : 0;
    row->seconds = r->elapsed_s;
    snprintf(row->status, sizeof row->status, "%s", r->status ? r->status : "");
    return 0;
}

int ghf_h5_out_put(ghf_h5_writer *w, const char *object, int n_attr, const ghf_h5_attr *at, int n_arr,
                   const ghf_h5_array *arr, char *err, size_t errlen)
{
    if (!w || w->f < 0) {
        ghf__seterr(err, errlen, "result writer is not open");
        return 1;
    }
    ghf__h5_quiet();
    int bad = 0;
    for (int i = 0; i < n_arr && !bad; i++) bad |= ghf__h5_put_array(w->f, &arr[i]) < 0;
    if (!bad && n_attr > 0) {
        hid_t o = H5Oopen(w->f, object, H5P_DEFAULT);
        bad |= o < 0;
        for (int i = 0; i < n_attr && !bad; i++) {
            if (at[i].type == GHF_H5_ATTR_STR) bad |= ghf__attr_str(o, at[i].key, at[i].str ? at[i].str : "") < 0;
            else if (at[i].type == GHF_H5_ATTR_F64) bad |= ghf__attr_f64(o, at[i].key, at[i].f64) < 0;
            else bad |= ghf__attr_i64(o, at[i].key, at[i].i64) < 0;
        }
        if (o >= 0) H5Oclose(o);
    }
    if (bad) ghf__seterr(err, errlen, "%s: cannot write %s", w->final_path, object);
    return bad ? 1 : 0;
}

int ghf_h5_out_commit(ghf_h5_writer *w, char *err, size_t errlen)
{
    if (!w) {
        ghf__seterr(err, errlen, "result writer is not open");
        return 2;
    }
    ghf__h5_quiet();
    int bad = 0;
    hid_t t = summary_type(), ft = H5Tcopy(t);
    H5Tpack(ft); /* no padding on disk */
    hsize_t nf = (hsize_t)w->n_fits;
    bad |= write_ds(w->f, "summary", ft, t, 1, &nf, w->rows,
                    "one row per fit: name, family, n, d, loglik, aic, bic, n_iter, converged, seconds") < 0;
    H5Tclose(ft);
    H5Tclose(t);
    bad |= H5Gclose(w->fits) < 0;
    w->fits = -1;
    if (bad) {
        ghf__seterr(err, errlen, "%s: writing /summary failed (out of memory?)", w->final_path);
        writer_discard(w);
        writer_free(w);
        return 1;
    }
    char why[256] = "";
    const hid_t f = w->f;
    w->f = -1; /* closed (and mf freed) by the save, whatever happens */
    ghf__memfile *mf = w->mf;
    w->mf = NULL;
    if (ghf__h5_mem_save(f, mf, w->final_path, &w->tmp_path, why, sizeof why) != 0) {
        ghf__seterr(err, errlen, "%s: writing the result file failed: %s", w->final_path, why);
        writer_free(w);
        return 1;
    }
    if (rename(w->tmp_path, w->final_path) != 0) {
        ghf__seterr(err, errlen, "%s: cannot rename %s into place: %s", w->final_path, w->tmp_path,
                    strerror(errno));
        unlink(w->tmp_path);
        writer_free(w);
        return 1;
    }
    ghf__fsync_parent(w->final_path);
    writer_free(w);
    return 0;
}

void ghf_h5_out_abort(ghf_h5_writer *w)
{
    if (!w) return;
    ghf__h5_quiet();
    writer_discard(w);
    writer_free(w);
}

/* ---------------------------------------------------------------------------
 * Read /summary back
 * ------------------------------------------------------------------------- */

int ghf_h5_read_fit_summary(const char *path, ghf_fit_summary **rows, int *n_rows,
                            char *err, size_t errlen)
{
    ghf__h5_quiet();
    if (rows) *rows = NULL;
    if (n_rows) *n_rows = 0;
    if (!rows || !n_rows) {
        ghf__seterr(err, errlen, "internal error: ghf_h5_read_fit_summary needs rows and n_rows");
        return 2;
    }
    if (!path || !*path) {
        ghf__seterr(err, errlen, "no result file given");
        return 2;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        ghf__seterr(err, errlen, "%s:/summary: cannot open file: %s", path, strerror(errno));
        return 2;
    }
    if (!S_ISREG(st.st_mode)) { /* a FIFO would block the first open() */
        ghf__seterr(err, errlen, "%s:/summary: is a %s, not a ghfit result file", path,
                    ghf__file_type_name(st.st_mode));
        return 2;
    }
    if (H5Fis_hdf5(path) <= 0) {
        ghf__seterr(err, errlen, "%s:/summary: not an HDF5 file", path);
        return 2;
    }
    hid_t f = ghf__h5_open_ro(path);
    if (f < 0) {
        if (!ghf__explain_open_failure(path, "/summary", err, errlen))
            ghf__seterr(err, errlen, "%s:/summary: HDF5 file is truncated or corrupt", path);
        return 2;
    }
    int rc = 2;
    hid_t ds = H5Dopen2(f, "/summary", H5P_DEFAULT), ft = -1, sp = -1, mt = -1;
    if (ds < 0) {
        ghf__seterr(err, errlen, "%s:/summary: no such dataset (not a ghfit result file?)", path);
        goto done;
    }
    ft = H5Dget_type(ds);
    sp = H5Dget_space(ds);
    if (H5Tget_class(ft) != H5T_COMPOUND || H5Sget_simple_extent_ndims(sp) != 1) {
        ghf__seterr(err, errlen, "%s:/summary: not a 1-D compound table", path);
        goto done;
    }
    hsize_t n = 0;
    H5Sget_simple_extent_dims(sp, &n, NULL);
    if (n > (hsize_t)1000000) {
        ghf__seterr(err, errlen, "%s:/summary: implausible row count %llu", path, (unsigned long long)n);
        goto done;
    }
    if (n == 0) {
        rc = 0;
        goto done;
    }
    ghf_fit_summary *r = (ghf_fit_summary *)calloc((size_t)n, sizeof *r);
    if (!r) {
        ghf__seterr(err, errlen, "%s:/summary: out of memory", path);
        rc = 1;
        goto done;
    }
    mt = summary_type();
    if (H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, r) < 0) {
        ghf__seterr(err, errlen, "%s:/summary: cannot read the table (fields missing or wrong types?)", path);
        free(r);
        goto done;
    }
    for (hsize_t i = 0; i < n; i++) {
        r[i].name[sizeof r[i].name - 1] = '\0';
        r[i].family[sizeof r[i].family - 1] = '\0';
        r[i].status[sizeof r[i].status - 1] = '\0';
    }
    *rows = r;
    *n_rows = (int)n;
    rc = 0;
done:
    if (mt >= 0) H5Tclose(mt);
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    if (ds >= 0) H5Dclose(ds);
    H5Fclose(f);
    return rc;
}

int ghf_h5_read_run_ident(const char *path, ghf_run_ident *id, char *err, size_t errlen)
{
    ghf__h5_quiet();
    memset(id, 0, sizeof *id);
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode) || H5Fis_hdf5(path) <= 0) {
        ghf__seterr(err, errlen, "%s: not a readable HDF5 result file", path ? path : "(null)");
        return 2;
    }
    hid_t f = ghf__h5_open_ro(path);
    if (f < 0) {
        if (!ghf__explain_open_failure(path, NULL, err, errlen))
            ghf__seterr(err, errlen, "%s: HDF5 file is truncated or corrupt", path);
        return 2;
    }
    char *slice = ghf__attr_read_str(f, "slice"), *hash = ghf__attr_read_str(f, "job_hash");
    int64_t total = 0;
    if (slice && hash && ghf__attr_read_i64(f, "n_fits_total", &total) == 0 &&
        sscanf(slice, "%d/%d", &id->slice_k, &id->slice_n) == 2 && id->slice_n >= 1 && id->slice_k >= 0 &&
        id->slice_k < id->slice_n && strlen(hash) < sizeof id->job_hash) {
        id->have = 1;
        snprintf(id->job_hash, sizeof id->job_hash, "%s", hash);
        id->n_fits_total = total;
    } else {
        id->slice_k = id->slice_n = 0;
    }
    free(slice);
    free(hash);
    H5Fclose(f);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Late profile update: the write phase of a fit is known only after its
 * record was written, so the caller overwrites /fits/<name>/profile before
 * the commit (same shape; the file stays atomic).
 * ------------------------------------------------------------------------- */

int ghf_h5_out_set_profile(ghf_h5_writer *w, const char *name, int n_ranks, int n_phases,
                           const double *phase_s, char *err, size_t errlen)
{
    if (!w || w->f < 0 || !name || n_ranks < 1 || n_phases < 1 || !phase_s) {
        ghf__seterr(err, errlen, "internal: invalid profile update");
        return 2;
    }
    char path[512];
    snprintf(path, sizeof path, "/fits/%s/profile", name);
    hid_t g = H5Gopen2(w->f, path, H5P_DEFAULT);
    if (g < 0) {
        ghf__seterr(err, errlen, "%s:%s: no such profile group", w->final_path, path);
        return 2;
    }
    double *st = (double *)malloc(3 * (size_t)n_phases * sizeof(double));
    int bad = !st;
    if (st) {
        double *mn = st, *me = st + n_phases, *mx = st + 2 * n_phases;
        for (int j = 0; j < n_phases; j++) {
            mn[j] = INFINITY;
            mx[j] = -INFINITY;
            me[j] = 0.0;
            for (int k = 0; k < n_ranks; k++) {
                const double v = phase_s[(size_t)k * n_phases + j];
                mn[j] = v < mn[j] ? v : mn[j];
                mx[j] = v > mx[j] ? v : mx[j];
                me[j] += v;
            }
            me[j] /= n_ranks;
        }
        const char *names[4] = {"seconds", "min", "mean", "max"};
        const double *src[4] = {phase_s, mn, me, mx};
        const hssize_t want[4] = {(hssize_t)n_ranks * n_phases, n_phases, n_phases, n_phases};
        for (int i = 0; i < 4 && !bad; i++) {
            hid_t ds = H5Dopen2(g, names[i], H5P_DEFAULT);
            if (ds < 0) {
                bad = 1;
                break;
            }
            hid_t sp = H5Dget_space(ds);
            if (H5Sget_simple_extent_npoints(sp) != want[i] ||
                H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, src[i]) < 0)
                bad = 1;
            H5Sclose(sp);
            H5Dclose(ds);
        }
    }
    free(st);
    H5Gclose(g);
    if (bad) {
        ghf__seterr(err, errlen, "%s:%s: updating the profile failed", w->final_path, path);
        return 1;
    }
    return 0;
}
