/* h5risk.c - the file `ghfit risk` writes: /alpha, /var, /es and root
 * attributes naming the model and the portfolios (docs/output-schema.md),
 * built in memory and renamed into place when complete. */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "h5internal.h"

static int put_f64(hid_t loc, const char *name, int rank, const hsize_t *dims, const double *v, const char *desc)
{
    hid_t s = H5Screate_simple(rank, dims, NULL);
    if (s < 0) return -1;
    hid_t ds = H5Dcreate2(loc, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = ds < 0 ? -1 : 0;
    if (!rc && H5Sget_simple_extent_npoints(s) > 0 && H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        rc = -1;
    if (!rc && ghf__attr_str(ds, "description", desc) < 0) rc = -1;
    if (ds >= 0 && H5Dclose(ds) < 0) rc = -1;
    H5Sclose(s);
    return rc;
}

static int put_attrs(hid_t f, const ghf_risk_file *r)
{
    const ghf_out_meta *m = r->meta;
    char created[32];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    int bad = 0;
    bad |= ghf__attr_str(f, "ghfit_version", m && m->version ? m->version : "unknown") < 0;
    bad |= ghf__attr_str(f, "git_commit", m && m->git_commit ? m->git_commit : "unknown") < 0;
    bad |= ghf__attr_str(f, "created", created) < 0;
    bad |= ghf__attr_str(f, "command_line", m && m->command_line ? m->command_line : "") < 0;
    bad |= ghf__attr_int(f, "n_ranks", m ? m->n_ranks : 1) < 0;
    bad |= ghf__attr_str(f, "content", "risk") < 0;
    bad |= ghf__attr_str(f, "model_file", r->model_file) < 0;
    bad |= ghf__attr_str(f, "fit", r->fit_name) < 0;
    bad |= ghf__attr_str(f, "family", r->family) < 0;
    bad |= ghf__attr_str(f, "portfolios_file", r->portfolios_file) < 0;
    bad |= ghf__attr_str(f, "portfolios_dataset", r->portfolios_dataset) < 0;
    bad |= ghf__attr_i64(f, "n_portfolios", r->n_portfolios) < 0;
    bad |= ghf__attr_int(f, "dim", r->d) < 0;
    bad |= ghf__attr_str(f, "loss", "L = -w'X (VaR_alpha: the alpha-quantile of L; ES_alpha = E[L | L >= VaR_alpha])") < 0;
    if (r->note) bad |= ghf__attr_str(f, "note", r->note) < 0;
    return bad ? -1 : 0;
}

int ghf_h5_write_risk(const char *path, const ghf_risk_file *r, char *err, size_t errlen)
{
    ghf__h5_quiet();
    ghf__memfile *mf = NULL;
    hid_t f = ghf__h5_mem_create(path, H5F_LIBVER_V18, &mf);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot create the risk file in memory", path);
        return 1;
    }
    const hsize_t k = (hsize_t)r->n_alpha, pk[2] = {(hsize_t)r->n_portfolios, (hsize_t)r->n_alpha};
    int bad = put_attrs(f, r) < 0;
    bad |= put_f64(f, "alpha", 1, &k, r->alpha, "confidence levels alpha [K]") < 0;
    bad |= put_f64(f, "var", 2, pk, r->var,
                   "Value-at-Risk [P][K]: the alpha-quantile of the loss L = -w'X of each portfolio w") < 0;
    bad |= put_f64(f, "es", 2, pk, r->es,
                   "Expected Shortfall [P][K]: E[L | L >= VaR_alpha] (+inf where the tail has no mean)") < 0;
    if (bad) {
        ghf__h5_mem_discard(f, mf);
        ghf__seterr(err, errlen, "%s: building the risk file failed (out of memory?)", path);
        return 1;
    }
    char why[256] = "", *tmp = NULL;
    if (ghf__h5_mem_save(f, mf, path, &tmp, why, sizeof why) != 0) {
        ghf__seterr(err, errlen, "%s: writing the risk file failed: %s", path, why);
        return 1;
    }
    int st = 0;
    if (rename(tmp, path) != 0) {
        ghf__seterr(err, errlen, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        unlink(tmp);
        st = 1;
    } else {
        ghf__fsync_parent(path);
    }
    free(tmp);
    return st;
}
