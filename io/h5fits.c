/* h5fits.c - what a result file says about each fit's model and data
 * (ghf_h5_read_fit_models): the attributes symmetric, p_fixed, data_file,
 * dataset, row_start, row_count and n_dropped of /fits/<name>, for the
 * likelihood-ratio tests of `ghfit summary --lrt`; one fit's law
 * (ghf_h5_read_fit_law) for `ghfit eval` and `ghfit sample`; and the fitted
 * law of one fit (ghf_h5_read_fit_params) for `ghfit risk`. */
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
        char gname[96];
        snprintf(gname, sizeof gname, "/fits/%s", rows[i].name);
        hid_t g = H5Lexists(f, "/fits", H5P_DEFAULT) > 0 && H5Lexists(f, gname, H5P_DEFAULT) > 0
                      ? H5Gopen2(f, gname, H5P_DEFAULT)
                      : -1;
        if (g < 0) continue; /* the summary row alone: no model details */
        int64_t v;
        if (ghf__attr_read_i64(g, "symmetric", &v) == 0) m->symmetric = v != 0;
        ghf__attr_read_f64(g, "p_fixed", &m->p_fixed);
        if (ghf__attr_read_i64(g, "n_dropped", &v) == 0) m->n_dropped = v;
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

/* The group /fits/<name> and its parameters into law (the fit named, or the
 * only one).  0, or 2 with a message. */
static int read_law(hid_t f, const char *path, const char *name, ghf_fit_law *law, char *err, size_t errlen)
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
    if (g < 0 || attr_str(g, "family", law->family, sizeof law->family) != 0 || ghf__attr_read_i64(g, "dim", &d) != 0 ||
        d < 1 || d > 100000) {
        if (g >= 0) H5Gclose(g);
        ghf__seterr(err, errlen, "%s:/fits/%s: no attributes family and dim: not a fit of a ghfit result file", path,
                    name);
        return 2;
    }
    if (attr_str(g, "status", law->status, sizeof law->status) != 0) law->status[0] = '\0';
    if (ghf__attr_read_f64(g, "loglik", &law->loglik) != 0) law->loglik = NAN;
    if (ghf__attr_read_i64(g, "n_obs", &law->n_obs) != 0) law->n_obs = -1;
    law->d = (int)d;
    law->mu = calloc((size_t)d, sizeof(double));
    law->gamma = calloc((size_t)d, sizeof(double));
    law->sigma = calloc((size_t)d * (size_t)d, sizeof(double));
    int st = 0;
    const char *bad = NULL;
    if (!law->mu || !law->gamma || !law->sigma) {
        ghf__seterr(err, errlen, "%s:/fits/%s: out of memory for d = %d", path, name, (int)d);
        st = 1;
    } else if (read_f64(g, "params/mu", d, law->mu)) bad = "mu";
    else if (read_f64(g, "params/gamma", d, law->gamma)) bad = "gamma";
    else if (read_f64(g, "params/sigma", d * d, law->sigma)) bad = "sigma";
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

int ghf_h5_read_fit_law(const char *path, const char *name, ghf_fit_law *law, char *err, size_t errlen)
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
        st = read_law(f, path, name, law, err, errlen);
    }
    H5Fclose(f);
    return st;
}

void ghf_fit_law_free(ghf_fit_law *law)
{
    if (!law) return;
    free(law->mu);
    free(law->gamma);
    free(law->sigma);
    law->mu = law->gamma = law->sigma = NULL;
}
/* ---------------------------------------------------------------------------
 * The fitted law of one fit (ghf_h5_read_fit_params)
 * ------------------------------------------------------------------------- */

/* a float64-convertible dataset of exactly n values (rank 0: scalar) into v */
static int read_param(hid_t gp, const char *name, int rank, hsize_t n, double *v)
{
    if (H5Lexists(gp, name, H5P_DEFAULT) <= 0) return -1;
    hid_t ds = H5Dopen2(gp, name, H5P_DEFAULT), sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hid_t t = ds >= 0 ? H5Dget_type(ds) : -1;
    int rc = -1;
    if (sp >= 0 && t >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Sget_simple_extent_ndims(sp) == rank &&
        (hsize_t)H5Sget_simple_extent_npoints(sp) == n)
        rc = H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0 ? -1 : 0;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    return rc;
}

void ghf_fit_params_free(ghf_fit_params *fp)
{
    if (!fp) return;
    free(fp->mu);
    free(fp->gamma);
    free(fp->sigma);
    fp->mu = fp->gamma = fp->sigma = NULL;
}

static int read_params_group(hid_t g, const char *where, ghf_fit_params *o, char *err, size_t errlen)
{
    int64_t d64 = 0;
    if (attr_str(g, "family", o->family, sizeof o->family) != 0 || ghf__attr_read_i64(g, "dim", &d64) != 0 || d64 < 1 ||
        d64 > 100000) {
        ghf__seterr(err, errlen, "%s: no family or dim attribute (not a fit of a ghfit result file)", where);
        return 2;
    }
    if (attr_str(g, "status", o->status, sizeof o->status) != 0) o->status[0] = '\0';
    const int d = (int)d64;
    o->d = d;
    o->mu = malloc((size_t)d * sizeof(double));
    o->gamma = malloc((size_t)d * sizeof(double));
    o->sigma = malloc((size_t)d * (size_t)d * sizeof(double));
    if (!o->mu || !o->gamma || !o->sigma) {
        ghf__seterr(err, errlen, "%s: out of memory", where);
        return 1;
    }
    hid_t gp = H5Lexists(g, "params", H5P_DEFAULT) > 0 ? H5Gopen2(g, "params", H5P_DEFAULT) : -1;
    const char *bad = gp < 0 ? "params" : NULL;
    if (!bad && read_param(gp, "mu", 1, (hsize_t)d, o->mu) != 0) bad = "params/mu";
    if (!bad && read_param(gp, "gamma", 1, (hsize_t)d, o->gamma) != 0) bad = "params/gamma";
    if (!bad && read_param(gp, "sigma", 2, (hsize_t)d * (hsize_t)d, o->sigma) != 0) bad = "params/sigma";
    if (!bad && read_param(gp, "p", 0, 1, &o->p) != 0) bad = "params/p";
    if (!bad && read_param(gp, "a", 0, 1, &o->a) != 0) bad = "params/a";
    if (!bad && read_param(gp, "b", 0, 1, &o->b) != 0) bad = "params/b";
    if (gp >= 0) H5Gclose(gp);
    if (bad) {
        ghf__seterr(err, errlen, "%s/%s: missing, or not a float dataset of the fit's dimension %d", where, bad, d);
        return 2;
    }
    return 0;
}

int ghf_h5_read_fit_params(const char *path, const char *name, ghf_fit_params *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->p = out->a = out->b = NAN;
    ghf__h5_quiet();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, 1, 1);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot open the result file", path);
        return 2;
    }
    char where[1400];
    snprintf(where, sizeof where, "%s:/fits/%s", path, name);
    char gname[300];
    snprintf(gname, sizeof gname, "/fits/%s", name);
    hid_t g = strlen(name) < 256 && !strchr(name, '/') && H5Lexists(f, "/fits", H5P_DEFAULT) > 0 &&
                      H5Lexists(f, gname, H5P_DEFAULT) > 0
                  ? H5Gopen2(f, gname, H5P_DEFAULT)
                  : -1;
    int st = 0;
    if (g < 0) {
        ghf__seterr(err, errlen, "%s: no such fit in the result file", where);
        st = 2;
    } else {
        st = read_params_group(g, where, out, err, errlen);
        H5Gclose(g);
    }
    H5Fclose(f);
    if (st) ghf_fit_params_free(out);
    return st;
}
