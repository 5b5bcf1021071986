/* h5fits.c - what a result file says about each fit's model and data
 * (ghf_h5_read_fit_models): the attributes symmetric, p_fixed, data_file,
 * dataset, row_start, row_count and n_dropped of /fits/<name>, for the
 * likelihood-ratio tests of `ghfit summary --lrt`; and one fit's law
 * (ghf_h5_read_fit_law) for `ghfit eval`, `sample` and `risk`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5internal.h"

/* a string attribute into buf; -1 if absent */
static int attr_str(hid_t g, const char *name, char *buf, size_t len)
{
    char *s = ghf__attr_read_str(g, name);
    if (!s) return -1;
    snprintf(buf, len, "%s", s);
    free(s);
    return 0;
}

int ghf_h5_read_fit_models(const char *path, const ghf_fit_summary *rows, int n, ghf_fit_model_info *info,
                           char *err, size_t errlen)
{
    ghf__h5_quiet();
    hid_t f = ghf__h5_open_ro(path);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot open the result file", path);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        ghf_fit_model_info *m = &info[i];
        memset(m, 0, sizeof *m);
        m->symmetric = -1;
        m->p_fixed = NAN;
        m->loglik_unweighted = NAN;
        m->factors = -1;
        m->n_components = 1;
        m->icl = NAN;
        char gname[96];
        snprintf(gname, sizeof gname, "/fits/%s", rows[i].name);
        hid_t g = H5Lexists(f, "/fits", H5P_DEFAULT) > 0 && H5Lexists(f, gname, H5P_DEFAULT) > 0
                      ? H5Gopen2(f, gname, H5P_DEFAULT)
                      : -1;
        if (g < 0) continue; /* the summary row alone: no model details */
        int64_t v;
        if (ghf__attr_read_i64(g, "symmetric", &v) == 0) m->symmetric = v != 0;
        ghf__attr_read_f64(g, "p_fixed", &m->p_fixed);
        if (ghf__attr_read_f64(g, "loglik_unweighted", &m->loglik_unweighted) != 0) m->loglik_unweighted = NAN;
        if (ghf__attr_read_i64(g, "n_dropped", &v) == 0) m->n_dropped = v;
        if (ghf__attr_read_i64(g, "factors", &v) == 0 && v >= 0 && v <= 100000) m->factors = (int)v;
        if (ghf__attr_read_i64(g, "n_components", &v) == 0 && v >= 1 && v <= 1000000) m->n_components = (int)v;
        if (ghf__attr_read_f64(g, "icl", &m->icl) != 0) m->icl = NAN;
        m->has_data = attr_str(g, "data_file", m->data_file, sizeof m->data_file) == 0;
        if (m->has_data) {
            if (attr_str(g, "dataset", m->dataset, sizeof m->dataset) != 0) snprintf(m->dataset, sizeof m->dataset, "/X");
            if (ghf__attr_read_i64(g, "row_start", &m->row_start) != 0) m->row_start = 0;
            if (ghf__attr_read_i64(g, "row_count", &m->row_count) != 0) m->row_count = -1;
        }
        H5Gclose(g);
    }
    H5Fclose(f);
    return 0;
}

int ghf_h5_read_fit_ncomp(const char *path, const ghf_fit_summary *rows, int n, int *K, double *icl, char *err,
                          size_t errlen)
{
    ghf__h5_quiet();
    hid_t f = ghf__h5_open_ro(path);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot open the result file", path);
        return 2;
    }
    const int has_fits = H5Lexists(f, "/fits", H5P_DEFAULT) > 0;
    for (int i = 0; i < n; i++) {
        K[i] = 1;
        icl[i] = NAN;
        char gname[96];
        snprintf(gname, sizeof gname, "/fits/%s", rows[i].name);
        hid_t g = has_fits && H5Lexists(f, gname, H5P_DEFAULT) > 0 ? H5Gopen2(f, gname, H5P_DEFAULT) : -1;
        if (g < 0) continue;
        int64_t v;
        if (ghf__attr_read_i64(g, "n_components", &v) == 0 && v >= 1 && v <= 1000000) K[i] = (int)v;
        if (ghf__attr_read_f64(g, "icl", &icl[i]) != 0) icl[i] = NAN;
        H5Gclose(g);
    }
    H5Fclose(f);
    return 0;
}

/* ---------------------------------------------------------------------------
 * One fit's law (ghf_h5_read_fit_law)
 * ------------------------------------------------------------------------- */

typedef struct fit_names {
    char list[512]; /* "a, b, c" (cut) */
    char first[64];
    int n;
} fit_names;

static herr_t collect_name(hid_t g, const char *name, const H5L_info_t *info, void *op)
{
    (void)g;
    (void)info;
    fit_names *fn = op;
    if (fn->n == 0) snprintf(fn->first, sizeof fn->first, "%s", name);
    const size_t l = strlen(fn->list);
    if (l + strlen(name) + 3 < sizeof fn->list) snprintf(fn->list + l, sizeof fn->list - l, "%s%s", l ? ", " : "", name);
    fn->n++;
    return 0;
}

/* A float64 dataset of exactly `count` elements (rank 0 or 1/2 with that many) into v. */
static int read_f64(hid_t g, const char *name, int64_t count, double *v)
{
    if (H5Lexists(g, name, H5P_DEFAULT) <= 0) return -1;
    hid_t ds = H5Dopen2(g, name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t sp = H5Dget_space(ds);
    const hssize_t np = H5Sget_simple_extent_npoints(sp);
    int rc = -1;
    if (np == count && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0) rc = 0;
    H5Sclose(sp);
    H5Dclose(ds);
    return rc;
}

/* params/sigma, or for a factor-form fit (attribute factors) without it
 * (d > 1000: docs/output-schema.md) Sigma = B B' + diag(D) formed from
 * params/B and params/D.  0, or -1. */
static int read_sigma(hid_t g, int64_t d, int dense, ghf_fit_law *law)
{
    int64_t nf = -1;
    law->factors = ghf__attr_read_i64(g, "factors", &nf) == 0 ? (int)nf : -1;
    if (law->factors < 0 || dense) { /* Sigma [d*d] (a factor fit without dense: B and D only) */
        law->sigma = calloc((size_t)d * (size_t)d, sizeof(double));
        if (!law->sigma) return -2;
    }
    if (law->factors < 0) return read_f64(g, "params/sigma", d * d, law->sigma);
    if (nf >= d) return -1;
    double *B = malloc((size_t)(d * (nf > 0 ? nf : 1) + d) * sizeof(double)), *D = B ? B + d * (nf > 0 ? nf : 1) : NULL;
    int rc = !B || read_f64(g, "params/D", d, D) || (nf > 0 && read_f64(g, "params/B", d * nf, B)) ? -1 : 0;
    law->B = B; /* one block: B [d*nf], then D [d] */
    law->D = D;
    if (rc == 0 && !dense) return 0;
    if (rc == 0 && H5Lexists(g, "params/sigma", H5P_DEFAULT) > 0) return read_f64(g, "params/sigma", d * d, law->sigma);
    for (int64_t i = 0; rc == 0 && i < d; i++)
        for (int64_t j = 0; j <= i; j++) {
            double v = i == j ? D[i] : 0.0;
            for (int64_t k = 0; k < nf; k++) v += B[i * nf + k] * B[j * nf + k];
            law->sigma[i * d + j] = law->sigma[j * d + i] = v;
        }
    return rc;
}

/* The largest K a mixture may declare (its components are read one by one). */
#define GHF_MIX_MAX_K 4096

/* components/<k>/params of a mixture fit g (n_components K) into law->prop
 * and law->comp, checked against the schema.  0, or 1/2 with a message
 * naming the file, the fit and the dataset. */
static int read_mixture(hid_t g, const char *path, int64_t K, ghf_fit_law *law, char *err, size_t errlen)
{
    const char *name = law->name;
    const int64_t d = law->d;
    law->p = law->a = law->b = NAN;
    if (K < 2 || K > GHF_MIX_MAX_K) {
        ghf__seterr(err, errlen, "%s:/fits/%s: attribute n_components = %lld is not a number of components "
                    "(1 to %d)", path, name, (long long)K, GHF_MIX_MAX_K);
        return 2;
    }
    law->prop = calloc((size_t)K, sizeof(double));
    law->comp = calloc((size_t)K, sizeof(ghf_fit_law));
    if (!law->prop || !law->comp) {
        ghf__seterr(err, errlen, "%s:/fits/%s: out of memory for %lld components", path, name, (long long)K);
        return 1;
    }
    law->n_components = (int)K;
    if (read_f64(g, "proportions", K, law->prop)) {
        ghf__seterr(err, errlen, "%s:/fits/%s/proportions: missing or not of n_components = %lld values", path, name,
                    (long long)K);
        return 2;
    }
    double sum = 0.0;
    for (int64_t k = 0; k < K; k++) {
        if (!(isfinite(law->prop[k]) && law->prop[k] > 0.0 && law->prop[k] <= 1.0)) {
            ghf__seterr(err, errlen, "%s:/fits/%s/proportions: value %lld is %g (a proportion in (0, 1])", path, name,
                        (long long)k, law->prop[k]);
            return 2;
        }
        sum += law->prop[k];
    }
    if (!(fabs(sum - 1.0) <= 1e-8)) {
        ghf__seterr(err, errlen, "%s:/fits/%s/proportions: the %lld proportions sum to %.12g, not 1", path, name,
                    (long long)K, sum);
        return 2;
    }
    hsize_t nlinks = 0;
    hid_t cg = H5Lexists(g, "components", H5P_DEFAULT) > 0 ? H5Gopen2(g, "components", H5P_DEFAULT) : -1;
    H5G_info_t gi;
    if (cg >= 0 && H5Gget_info(cg, &gi) >= 0) nlinks = gi.nlinks;
    if (cg >= 0) H5Gclose(cg);
    if (cg < 0 || (int64_t)nlinks != K) {
        if (cg < 0)
            ghf__seterr(err, errlen, "%s:/fits/%s/components: missing, but n_components = %lld", path, name,
                        (long long)K);
        else
            ghf__seterr(err, errlen, "%s:/fits/%s/components: holds %llu components, but n_components = %lld", path,
                        name, (unsigned long long)nlinks, (long long)K);
        return 2;
    }
    for (int64_t k = 0; k < K; k++) {
        ghf_fit_law *c = &law->comp[k];
        snprintf(c->name, sizeof c->name, "%s", law->name);
        snprintf(c->family, sizeof c->family, "%s", law->family);
        snprintf(c->status, sizeof c->status, "%s", law->status);
        c->d = law->d;
        c->n_components = 1;
        c->factors = -1;
        c->loglik = NAN;
        c->n_obs = -1;
        c->p_fixed = law->p_fixed;
        c->symmetric = law->symmetric;
        c->mu = calloc((size_t)d, sizeof(double));
        c->gamma = calloc((size_t)d, sizeof(double));
        c->sigma = calloc((size_t)d * (size_t)d, sizeof(double));
        if (!c->mu || !c->gamma || !c->sigma) {
            ghf__seterr(err, errlen, "%s:/fits/%s: out of memory for d = %d", path, name, (int)d);
            return 1;
        }
        char grp[48];
        snprintf(grp, sizeof grp, "components/%lld/params", (long long)k);
        hid_t pg = H5Lexists(g, "components", H5P_DEFAULT) > 0 && H5Lexists(g, grp, H5P_DEFAULT) > 0
                       ? H5Gopen2(g, grp, H5P_DEFAULT)
                       : -1;
        if (pg < 0) {
            ghf__seterr(err, errlen, "%s:/fits/%s/%s: missing (components are named 0 to %lld)", path, name, grp,
                        (long long)K - 1);
            return 2;
        }
        const char *bad = read_f64(pg, "mu", d, c->mu)             ? "mu"
                          : read_f64(pg, "gamma", d, c->gamma)     ? "gamma"
                          : read_f64(pg, "sigma", d * d, c->sigma) ? "sigma"
                          : read_f64(pg, "p", 1, &c->p)            ? "p"
                          : read_f64(pg, "a", 1, &c->a)            ? "a"
                          : read_f64(pg, "b", 1, &c->b)            ? "b"
                                                                   : NULL;
        H5Gclose(pg);
        if (bad) {
            ghf__seterr(err, errlen, "%s:/fits/%s/%s/%s: missing or not of the fit's dimension %d", path, name, grp,
                        bad, (int)d);
            return 2;
        }
    }
    return 0;
}

/* The group /fits/<name> and its parameters into law (the fit named, or the
 * only one).  0, or 2 with a message. */
static int read_law(hid_t f, const char *path, const char *name, int dense, ghf_fit_law *law, char *err, size_t errlen)
{
    fit_names fn;
    memset(&fn, 0, sizeof fn);
    hid_t fits = H5Lexists(f, "/fits", H5P_DEFAULT) > 0 ? H5Gopen2(f, "/fits", H5P_DEFAULT) : -1;
    if (fits >= 0) {
        hsize_t idx = 0;
        H5Literate(fits, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &fn);
    }
    if (fn.n == 0) {
        if (fits >= 0) H5Gclose(fits);
        ghf__seterr(err, errlen, "%s: the result file holds no fits", path);
        return 2;
    }
    if (!name || !*name) {
        if (fn.n > 1) {
            H5Gclose(fits);
            ghf__seterr(err, errlen, "%s holds %d fits (%s): name one as %s:/fits/NAME", path, fn.n, fn.list, path);
            return 2;
        }
        name = fn.first;
    }
    if (strlen(name) >= sizeof law->name || strchr(name, '/') || H5Lexists(fits, name, H5P_DEFAULT) <= 0) {
        H5Gclose(fits);
        ghf__seterr(err, errlen, "%s: no fit named '%s' (it holds: %s)", path, name, fn.list);
        return 2;
    }
    snprintf(law->name, sizeof law->name, "%s", name);
    hid_t g = H5Gopen2(fits, name, H5P_DEFAULT);
    H5Gclose(fits);
    int64_t d = 0;
    int st = 0;
    if (g < 0 || attr_str(g, "family", law->family, sizeof law->family) != 0 || ghf__attr_read_i64(g, "dim", &d) != 0 ||
        d < 1 || d > GHF_D_MAX) {
        if (g >= 0) H5Gclose(g);
        ghf__seterr(err, errlen, "%s:/fits/%s: no attributes family and dim: not a fit of a ghfit result file", path,
                    name);
        return 2;
    }
    if (attr_str(g, "status", law->status, sizeof law->status) != 0) law->status[0] = '\0';
    if (ghf__attr_read_f64(g, "loglik", &law->loglik) != 0) law->loglik = NAN;
    if (ghf__attr_read_i64(g, "n_obs", &law->n_obs) != 0) law->n_obs = -1;
    int64_t sym = 0;
    law->symmetric = ghf__attr_read_i64(g, "symmetric", &sym) == 0 && sym != 0;
    if (ghf__attr_read_f64(g, "p_fixed", &law->p_fixed) != 0) law->p_fixed = NAN;
    law->d = (int)d;
    law->n_components = 1;
    int64_t K = 1;
    if (ghf__attr_read_i64(g, "n_components", &K) == 0 && K != 1) {
        st = read_mixture(g, path, K, law, err, errlen);
        H5Gclose(g);
        if (st) ghf_fit_law_free(law);
        return st;
    }
    law->mu = calloc((size_t)d, sizeof(double));
    law->gamma = calloc((size_t)d, sizeof(double));
    int rs = 0;
    const char *bad = NULL;
    if (!law->mu || !law->gamma) {
        ghf__seterr(err, errlen, "%s:/fits/%s: out of memory for d = %d", path, name, (int)d);
        st = 1;
    } else if (read_f64(g, "params/mu", d, law->mu)) bad = "mu";
    else if (read_f64(g, "params/gamma", d, law->gamma)) bad = "gamma";
    else if ((rs = read_sigma(g, d, dense, law)) == -2) {
        ghf__seterr(err, errlen, "%s:/fits/%s: out of memory for d = %d", path, name, (int)d);
        st = 1;
    } else if (rs) bad = law->factors >= 0 ? "B or D (of the factor form)" : "sigma";
    else if (read_f64(g, "params/p", 1, &law->p)) bad = "p";
    else if (read_f64(g, "params/a", 1, &law->a)) bad = "a";
    else if (read_f64(g, "params/b", 1, &law->b)) bad = "b";
    if (bad) {
        ghf__seterr(err, errlen, "%s:/fits/%s/params/%s: missing or not of the fit's dimension %d", path, name, bad,
                    (int)d);
        st = 2;
    }
    H5Gclose(g);
    if (st) ghf_fit_law_free(law);
    return st;
}

/* The file's fit `name` (NULL: its only fit), a single law or a mixture;
 * dense 0: a factor-form fit gets B and D only. */
static int read_any(const char *path, const char *name, int dense, ghf_fit_law *law, char *err, size_t errlen)
{
    memset(law, 0, sizeof *law);
    ghf__h5_quiet();
    hid_t f = ghf__h5_open_ro(path);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot open it as an HDF5 file (missing, unreadable or not HDF5)", path);
        return 2;
    }
    int st;
    if (H5Aexists(f, "ghfit_version") <= 0) {
        ghf__seterr(err, errlen, "%s: not a ghfit result file (no root attribute ghfit_version)", path);
        st = 2;
    } else {
        st = read_law(f, path, name, dense, law, err, errlen);
    }
    H5Fclose(f);
    return st;
}

static int read_fit_law(const char *path, const char *name, int dense, ghf_fit_law *law, char *err, size_t errlen)
{
    const int st = read_any(path, name, dense, law, err, errlen);
    if (st || law->n_components < 2) return st;
    ghf__seterr(err, errlen, "%s:/fits/%s is a %d-component mixture; this command needs a single law", path,
                law->name, law->n_components);
    ghf_fit_law_free(law);
    return 2;
}

int ghf_h5_read_fit_any(const char *path, const char *name, ghf_fit_law *law, char *err, size_t errlen)
{
    return read_any(path, name, 1, law, err, errlen);
}

int ghf_h5_read_fit_any_bd(const char *path, const char *name, ghf_fit_law *law, char *err, size_t errlen)
{
    return read_any(path, name, 0, law, err, errlen);
}

int ghf_h5_read_fit_law(const char *path, const char *name, ghf_fit_law *law, char *err, size_t errlen)
{
    return read_fit_law(path, name, 1, law, err, errlen);
}

void ghf_fit_law_free(ghf_fit_law *law)
{
    if (!law) return;
    free(law->mu);
    free(law->gamma);
    free(law->sigma);
    free(law->B); /* D lies in the same block */
    law->mu = law->gamma = law->sigma = law->B = law->D = NULL;
    for (int k = 0; law->comp && k < law->n_components; k++) ghf_fit_law_free(&law->comp[k]);
    free(law->comp);
    free(law->prop);
    law->comp = NULL;
    law->prop = NULL;
}
