/* checkpoint.c - see checkpoint.h: write and read ghfit checkpoint files
 * (serial HDF5, rank 0). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, link, nanosleep */
#endif

#include "checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "h5internal.h"

void ghf_ckpt_prev_path(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    if (dot && (!slash || dot > slash + 1)) {
        snprintf(buf, len, "%.*s_prev%s", (int)(dot - path), path, dot);
    } else {
        snprintf(buf, len, "%s_prev", path);
    }
}

void ghf_ckpt_free(ghf_ckpt *c)
{
    free(c->data_path);
    free(c->dataset);
    free(c->config_text);
    for (int i = 0; i < c->n_run; i++) {
        free(c->run[i].cur);
        free(c->run[i].prev);
        free(c->run[i].trace);
    }
    free(c->run);
    free(c->done_index);
    free(c->done_off);
    free(c->done_blob);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------- */

static int write_arr(hid_t loc, const char *name, hid_t ftype, hid_t mtype, hsize_t n, const void *data)
{
    hid_t s = H5Screate_simple(1, &n, NULL);
    if (s < 0) return -1;
    hid_t ds = H5Dcreate2(loc, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = -1;
    if (ds >= 0) {
        rc = 0;
        if (n > 0 && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) rc = -1;
        if (H5Dclose(ds) < 0) rc = -1;
    }
    H5Sclose(s);
    return rc;
}

static int write_text(hid_t loc, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = -1;
    if (ds >= 0) {
        rc = H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0 ? -1 : 0;
        if (H5Dclose(ds) < 0) rc = -1;
    }
    H5Sclose(s);
    H5Tclose(t);
    return rc;
}

static int write_contents(hid_t f, const ghf_ckpt *c)
{
    char hash[32], now[32];
    snprintf(hash, sizeof hash, "%016" PRIx64, c->hash);
    time_t t = time(NULL);
    struct tm tmv;
    gmtime_r(&t, &tmv);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    if (ghf__attr_str(f, "format", "ghfit-checkpoint") < 0 || ghf__attr_int(f, "format_version", GHF_CKPT_FORMAT_VERSION) < 0 ||
        ghf__attr_str(f, "kind", c->kind) < 0 || ghf__attr_str(f, "data_file", c->data_path) < 0 ||
        ghf__attr_str(f, "dataset", c->dataset) < 0 || ghf__attr_i64(f, "n_rows", c->n_rows) < 0 ||
        ghf__attr_int(f, "dim", c->d) < 0 || ghf__attr_str(f, "options_hash", hash) < 0 ||
        ghf__attr_i64(f, "n_fits", c->n_fits) < 0 || ghf__attr_str(f, "created", now) < 0)
        return -1;
    if (c->config_text && write_text(f, "config", c->config_text) < 0) return -1;
    hid_t g = H5Gcreate2(f, "running", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return -1;
    int rc = 0;
    for (int i = 0; i < c->n_run && rc == 0; i++) {
        const ghf_ckpt_run *r = &c->run[i];
        char nm[32];
        snprintf(nm, sizeof nm, "%d", i);
        hid_t rg = H5Gcreate2(g, nm, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (rg < 0) {
            rc = -1;
            break;
        }
        const hsize_t np = (hsize_t)ghf_ckpt_param_len(r->d);
        if (ghf__attr_i64(rg, "index", r->index) < 0 || ghf__attr_str(rg, "name", r->name) < 0 ||
            ghf__attr_int(rg, "iter", r->iter) < 0 || ghf__attr_int(rg, "dim", r->d) < 0 ||
            write_arr(rg, "cur", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, np, r->cur) < 0 ||
            write_arr(rg, "prev", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, np, r->prev) < 0 ||
            write_arr(rg, "trace", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, (hsize_t)r->iter, r->trace) < 0)
            rc = -1;
        if (H5Gclose(rg) < 0) rc = -1;
    }
    if (H5Gclose(g) < 0) rc = -1;
    if (rc) return rc;
    g = H5Gcreate2(f, "done", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return -1;
    const int64_t zero = 0;
    const int64_t *off = c->n_done > 0 ? c->done_off : &zero;
    const hsize_t nbytes = (hsize_t)off[c->n_done];
    if (write_arr(g, "index", H5T_STD_I64LE, H5T_NATIVE_INT64, (hsize_t)c->n_done, c->done_index) < 0 ||
        write_arr(g, "offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, (hsize_t)c->n_done + 1, off) < 0 ||
        write_arr(g, "records", H5T_STD_U8LE, H5T_NATIVE_UCHAR, nbytes, c->done_blob) < 0)
        rc = -1;
    if (H5Gclose(g) < 0) rc = -1;
    return rc;
}

static int g_n_writes = 0;

static void test_sleep(void)
{
    const char *s = getenv("GHFIT_TEST_CKPT_SLEEP");
    if (!s || !*s) return;
    double sec = atof(s);
    const char *at = strchr(s, '@');
    if (at && atoi(at + 1) != g_n_writes) return;
    if (sec <= 0) return;
    fprintf(stderr, "ghfit: checkpoint: test sleep %.1f s before the rename (write %d)\n", sec, g_n_writes);
    fflush(stderr);
    struct timespec ts = {(time_t)sec, (long)((sec - (double)(time_t)sec) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int ghf_ckpt_write(const char *path, const ghf_ckpt *c, char *err, size_t errlen)
{
    ghf__h5_quiet();
    g_n_writes++;
    char tmp[4200], prev[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()); /* created exclusively: replaces nothing */
    ghf_ckpt_prev_path(path, prev, sizeof prev);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_LATEST);
    hid_t f = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot create the checkpoint file %s", path, tmp);
        return 1;
    }
    int bad = write_contents(f, c) != 0;
    if (H5Fclose(f) < 0) bad = 1;
    if (!bad && ghf__fsync_path(tmp) != 0) bad = 1;
    if (bad) {
        unlink(tmp);
        ghf__seterr(err, errlen, "%s: writing the checkpoint failed (disk full?)", path);
        return 1;
    }
    test_sleep();
    /* keep the current one as _prev (a hard link: <path> never disappears);
     * only ghfit's own checkpoints are replaced, moved or removed */
    if (access(path, F_OK) == 0) {
        if (!ghf_path_is_ghfit(path, GHF_PATH_CHECKPOINT, NULL)) {
            unlink(tmp);
            ghf__seterr(err, errlen, "%s: exists and is no longer a ghfit checkpoint: not replaced", path);
            return 1;
        }
        if (access(prev, F_OK) != 0 || ghf_path_is_ghfit(prev, GHF_PATH_CHECKPOINT, NULL)) {
            unlink(prev);
            if (link(path, prev) != 0) {
                /* no hard links here: copy semantics by rename (a short window without <path>) */
                rename(path, prev);
            }
        }
    }
    if (rename(tmp, path) != 0) {
        ghf__seterr(err, errlen, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        unlink(tmp);
        return 1;
    }
    ghf__fsync_parent(path);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------- */

static int read_attr_str(hid_t loc, const char *name, char **out)
{
    hid_t at = H5Aopen(loc, name, H5P_DEFAULT);
    if (at < 0) return -1;
    hid_t ty = H5Aget_type(at);
    int rc = -1;
    if (H5Tget_class(ty) == H5T_STRING && H5Tis_variable_str(ty) > 0) {
        char *s = NULL;
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5T_CSET_UTF8);
        if (H5Aread(at, mt, &s) >= 0 && s) {
            *out = strdup(s);
            rc = *out ? 0 : -1;
        }
        H5free_memory(s);
        H5Tclose(mt);
    }
    H5Tclose(ty);
    H5Aclose(at);
    return rc;
}

static int read_attr_i64(hid_t loc, const char *name, int64_t *v)
{
    hid_t at = H5Aopen(loc, name, H5P_DEFAULT);
    if (at < 0) return -1;
    int rc = H5Aread(at, H5T_NATIVE_INT64, v) < 0 ? -1 : 0;
    H5Aclose(at);
    return rc;
}

/* 1-D dataset of exactly n elements (n < 0: any; *got receives the count) */
static int read_arr(hid_t loc, const char *name, hid_t mtype, size_t esize, int64_t n, void **out, int64_t *got)
{
    *out = NULL;
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t s = H5Dget_space(ds);
    int rc = -1;
    if (H5Sget_simple_extent_ndims(s) == 1) {
        const hssize_t m = H5Sget_simple_extent_npoints(s);
        if (m >= 0 && (n < 0 || m == n)) {
            void *buf = malloc((size_t)(m > 0 ? m : 1) * esize);
            if (buf && (m == 0 || H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0)) {
                *out = buf;
                if (got) *got = m;
                rc = 0;
            } else {
                free(buf);
            }
        }
    }
    H5Sclose(s);
    H5Dclose(ds);
    return rc;
}

static int read_text(hid_t loc, const char *name, char **out)
{
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, H5T_CSET_UTF8);
    char *s = NULL;
    int rc = -1;
    if (H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, &s) >= 0 && s) {
        *out = strdup(s);
        rc = *out ? 0 : -1;
    }
    H5free_memory(s);
    H5Tclose(mt);
    H5Dclose(ds);
    return rc;
}

static int read_contents(hid_t f, ghf_ckpt *c)
{
    char *fmt = NULL, *kind = NULL, *hash = NULL;
    int64_t ver = 0, v = 0;
    int rc = -1;
    if (read_attr_str(f, "format", &fmt) || strcmp(fmt, "ghfit-checkpoint") != 0) goto out;
    if (read_attr_i64(f, "format_version", &ver) || ver != GHF_CKPT_FORMAT_VERSION) goto out;
    if (read_attr_str(f, "kind", &kind) || read_attr_str(f, "data_file", &c->data_path) ||
        read_attr_str(f, "dataset", &c->dataset) || read_attr_i64(f, "n_rows", &c->n_rows) ||
        read_attr_i64(f, "dim", &v) || read_attr_str(f, "options_hash", &hash) ||
        read_attr_i64(f, "n_fits", &c->n_fits))
        goto out;
    snprintf(c->kind, sizeof c->kind, "%s", kind);
    c->d = (int)v;
    c->hash = strtoull(hash, NULL, 16);
    if (H5Lexists(f, "config", H5P_DEFAULT) > 0 && read_text(f, "config", &c->config_text)) goto out;
    hid_t g = H5Gopen2(f, "running", H5P_DEFAULT);
    if (g < 0) goto out;
    H5G_info_t gi;
    if (H5Gget_info(g, &gi) < 0) {
        H5Gclose(g);
        goto out;
    }
    c->run = calloc(gi.nlinks + 1, sizeof *c->run);
    int ok = c->run != NULL;
    for (hsize_t i = 0; ok && i < gi.nlinks; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%d", (int)i);
        hid_t rg = H5Gopen2(g, nm, H5P_DEFAULT);
        if (rg < 0) {
            ok = 0;
            break;
        }
        ghf_ckpt_run *r = &c->run[c->n_run++];
        char *name = NULL;
        int64_t it = 0, dd = 0;
        ok = read_attr_i64(rg, "index", &r->index) == 0 && read_attr_str(rg, "name", &name) == 0 &&
             read_attr_i64(rg, "iter", &it) == 0 && read_attr_i64(rg, "dim", &dd) == 0 && it >= 0 && dd >= 1;
        if (ok) {
            snprintf(r->name, sizeof r->name, "%s", name);
            r->iter = (int)it;
            r->d = (int)dd;
            const int64_t np = ghf_ckpt_param_len(r->d);
            ok = read_arr(rg, "cur", H5T_NATIVE_DOUBLE, sizeof(double), np, (void **)&r->cur, NULL) == 0 &&
                 read_arr(rg, "prev", H5T_NATIVE_DOUBLE, sizeof(double), np, (void **)&r->prev, NULL) == 0 &&
                 read_arr(rg, "trace", H5T_NATIVE_DOUBLE, sizeof(double), it, (void **)&r->trace, NULL) == 0;
        }
        free(name);
        H5Gclose(rg);
    }
    H5Gclose(g);
    if (!ok) goto out;
    g = H5Gopen2(f, "done", H5P_DEFAULT);
    if (g < 0) goto out;
    int64_t nd = 0, no = 0, nb = 0;
    ok = read_arr(g, "index", H5T_NATIVE_INT64, sizeof(int64_t), -1, (void **)&c->done_index, &nd) == 0 &&
         read_arr(g, "offsets", H5T_NATIVE_INT64, sizeof(int64_t), nd + 1, (void **)&c->done_off, &no) == 0 &&
         read_arr(g, "records", H5T_NATIVE_UCHAR, 1, -1, (void **)&c->done_blob, &nb) == 0;
    H5Gclose(g);
    if (!ok) goto out;
    c->n_done = (int)nd;
    if (c->done_off[0] != 0 || c->done_off[nd] != nb) goto out;
    for (int64_t i = 0; i < nd; i++)
        if (c->done_off[i + 1] < c->done_off[i]) goto out;
    rc = 0;
out:
    free(fmt);
    free(kind);
    free(hash);
    return rc;
}

int ghf_ckpt_read(const char *path, ghf_ckpt *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    ghf__h5_quiet();
    if (access(path, R_OK) != 0) {
        ghf__seterr(err, errlen, "%s: no such checkpoint file", path);
        return 2;
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: not an HDF5 file (damaged checkpoint?)", path);
        return 2;
    }
    const int rc = read_contents(f, c);
    H5Fclose(f);
    if (rc) {
        ghf_ckpt_free(c);
        ghf__seterr(err, errlen, "%s: not a ghfit checkpoint (format %d) or damaged", path, GHF_CKPT_FORMAT_VERSION);
        return 2;
    }
    return 0;
}
