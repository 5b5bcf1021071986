/* h5fits.c - what a result file says about each fit's model and data
 * (ghf_h5_read_fit_models): the attributes symmetric, p_fixed, data_file,
 * dataset, row_start, row_count and n_dropped of /fits/<name>, for the
 * likelihood-ratio tests of `ghfit summary --lrt`. */
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
