/* h5gof.c - small files of float64 arrays with typed root attributes, built
 * in memory by rank 0 and renamed into place when complete (`ghfit gof`;
 * docs/output-schema.md "Goodness-of-fit files"). */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "h5internal.h"

int ghf__h5_put_array(hid_t f, const ghf_h5_array *a)
{
    hsize_t dims[3];
    for (int i = 0; i < a->rank && i < 3; i++) dims[i] = (hsize_t)a->dims[i];
    hid_t s = a->rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(a->rank, dims, NULL);
    if (s < 0) return -1;
    hid_t lc = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lc, 1);
    hid_t ds = H5Dcreate2(f, a->name, H5T_IEEE_F64LE, s, lc, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(lc);
    int rc = ds < 0 ? -1 : 0;
    if (!rc && H5Sget_simple_extent_npoints(s) > 0 && H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, a->v) < 0)
        rc = -1;
    if (!rc && a->desc && ghf__attr_str(ds, "description", a->desc) < 0) rc = -1;
    if (ds >= 0 && H5Dclose(ds) < 0) rc = -1;
    H5Sclose(s);
    return rc;
}

static int put_root(hid_t f, const ghf_out_meta *m, const char *content, int n, const ghf_h5_attr *at)
{
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
    bad |= ghf__attr_str(f, "content", content) < 0;
    for (int i = 0; i < n; i++) {
        if (at[i].type == GHF_H5_ATTR_STR) bad |= ghf__attr_str(f, at[i].key, at[i].str ? at[i].str : "") < 0;
        else if (at[i].type == GHF_H5_ATTR_F64) bad |= ghf__attr_f64(f, at[i].key, at[i].f64) < 0;
        else bad |= ghf__attr_i64(f, at[i].key, at[i].i64) < 0;
    }
    return bad ? -1 : 0;
}

int ghf_h5_write_arrays(const char *path, const ghf_out_meta *meta, const char *content, int n_attr,
                        const ghf_h5_attr *attrs, int n_arr, const ghf_h5_array *arr, char *err, size_t errlen)
{
    ghf__h5_quiet();
    ghf__memfile *mf = NULL;
    hid_t f = ghf__h5_mem_create(path, H5F_LIBVER_V18, &mf);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot create the %s file in memory", path, content);
        return 1;
    }
    int bad = put_root(f, meta, content, n_attr, attrs) < 0;
    for (int i = 0; i < n_arr && !bad; i++) bad |= ghf__h5_put_array(f, &arr[i]) < 0;
    if (bad) {
        ghf__h5_mem_discard(f, mf);
        ghf__seterr(err, errlen, "%s: building the %s file failed (out of memory?)", path, content);
        return 1;
    }
    char why[256] = "", *tmp = NULL;
    if (ghf__h5_mem_save(f, mf, path, &tmp, why, sizeof why) != 0) {
        ghf__seterr(err, errlen, "%s: writing the %s file failed: %s", path, content, why);
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
    ghf__tmp_release(tmp);
    return st;
}
