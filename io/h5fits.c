/* h5fits.c - what a result file says about each fit's model and data
 * (ghf_h5_read_fit_models): the attributes symmetric, p_fixed, data_file,
 * dataset, row_start, row_count and n_dropped of /fits/<name>, for the
 * likelihood-ratio tests of `ghfit summary --lrt`; and the fitted law of one
 * fit (ghf_h5_read_fit_params) for the commands that use a fit (risk). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5internal.h"

static int attr_f64(hid_t g, const char *name, double *v)
{
    if (H5Aexists(g, name) <= 0) return -1;
    hid_t a = H5Aopen(g, name, H5P_DEFAULT);
    if (a < 0) return -1;
    const int rc = H5Aread(a, H5T_NATIVE_DOUBLE, v) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

static int attr_i64(hid_t g, const char *name, int64_t *v)
{
    if (H5Aexists(g, name) <= 0) return -1;
    hid_t a = H5Aopen(g, name, H5P_DEFAULT);
    if (a < 0) return -1;
    const int rc = H5Aread(a, H5T_NATIVE_INT64, v) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

/* a string attribute (variable or fixed length) into buf; -1 if absent */
static int attr_str(hid_t g, const char *name, char *buf, size_t len)
{
    if (H5Aexists(g, name) <= 0) return -1;
    hid_t a = H5Aopen(g, name, H5P_DEFAULT), t = a >= 0 ? H5Aget_type(a) : -1;
    int rc = -1;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_cset(mt, H5Tget_cset(t)); /* HDF5 converts no string between ASCII and UTF-8 */
        if (H5Tis_variable_str(t) > 0) {
            char *s = NULL;
            H5Tset_size(mt, H5T_VARIABLE);
            if (H5Aread(a, mt, &s) >= 0 && s) {
                snprintf(buf, len, "%s", s);
                rc = 0;
            }
            H5free_memory(s);
        } else {
            const size_t n = H5Tget_size(t);
            char *s = calloc(n + 1, 1);
            H5Tset_size(mt, n + 1);
            if (s && H5Aread(a, mt, s) >= 0) {
                snprintf(buf, len, "%s", s);
                rc = 0;
            }
            free(s);
        }
        H5Tclose(mt);
    }
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return rc;
}

int ghf_h5_read_fit_models(const char *path, const ghf_fit_summary *rows, int n, ghf_fit_model_info *info,
                           char *err, size_t errlen)
{
    ghf__h5_quiet();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, 1, 1);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
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
        if (attr_i64(g, "symmetric", &v) == 0) m->symmetric = v != 0;
        attr_f64(g, "p_fixed", &m->p_fixed);
        if (attr_i64(g, "n_dropped", &v) == 0) m->n_dropped = v;
        m->has_data = attr_str(g, "data_file", m->data_file, sizeof m->data_file) == 0;
        if (m->has_data) {
            if (attr_str(g, "dataset", m->dataset, sizeof m->dataset) != 0) snprintf(m->dataset, sizeof m->dataset, "/X");
            if (attr_i64(g, "row_start", &m->row_start) != 0) m->row_start = 0;
            if (attr_i64(g, "row_count", &m->row_count) != 0) m->row_count = -1;
        }
        H5Gclose(g);
    }
    H5Fclose(f);
    return 0;
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
    if (attr_str(g, "family", o->family, sizeof o->family) != 0 || attr_i64(g, "dim", &d64) != 0 || d64 < 1 ||
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
