/* h5fits.c - what a result file says about each fit's model and data
 * (ghf_h5_read_fit_models): the attributes symmetric, p_fixed, data_file,
 * dataset, row_start, row_count and n_dropped of /fits/<name>, for the
 * likelihood-ratio tests of `ghfit summary --lrt`. */
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
