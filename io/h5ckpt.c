/* h5ckpt.c - see h5ckpt.h: write and read ghfit checkpoint files
 * (serial HDF5 on a memory image, rank 0), and the data fingerprint. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, link, nanosleep */
#endif

#include "h5ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "h5internal.h"

#define UB_SIZE 512             /* the user block: signature and checksum */
#define UB_MAGIC GHF__CKPT_MAGIC
#define HDF5_MAGIC "\211HDF\r\n\032\n"
/* the name of the in-memory files: one that cannot exist on disk (HDF5's
 * core driver refuses to open an image under the name of an existing file) */
#define IMAGE_NAME "/proc/self/ghfit-checkpoint-image"

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
    free(c->log_name);
    memset(c, 0, sizeof *c);
}

/* little-endian fields of the user block */
static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

int ghf_ckpt_is_ours(const char *path) { return ghf__file_starts_with(path, UB_MAGIC, 8); }

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
    char fp[32];
    snprintf(fp, sizeof fp, "%016" PRIx64, c->data_fp);
    if (ghf__attr_str(f, "data_fingerprint", fp) < 0 || ghf__attr_i64(f, "data_fingerprint_rows", c->data_fp_rows) < 0)
        return -1;
    if (c->data_sum) {
        snprintf(fp, sizeof fp, "%016" PRIx64, c->data_sum);
        if (ghf__attr_str(f, "data_checksum", fp) < 0) return -1;
    }
    if (c->weights_sum) {
        snprintf(fp, sizeof fp, "%016" PRIx64, c->weights_sum);
        if (ghf__attr_str(f, "weights_checksum", fp) < 0) return -1;
    }
    if (c->log_name && (ghf__attr_str(f, "done_log", c->log_name) < 0 || ghf__attr_i64(f, "done_bytes", c->log_bytes) < 0 ||
                        ghf__attr_i64(f, "done_crc", (int64_t)c->log_crc) < 0 ||
                        ghf__attr_i64(f, "done_count", c->log_count) < 0))
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
        const hsize_t np = (hsize_t)ghf_ckpt_run_len(r->d, r->disp, r->nf);
        if (ghf__attr_i64(rg, "index", r->index) < 0 || ghf__attr_str(rg, "name", r->name) < 0 ||
            (r->family[0] && ghf__attr_str(rg, "family", r->family) < 0) ||
            (r->disp && (ghf__attr_str(rg, "sigma_structure", r->disp == 1 ? "diag" : "factor") < 0 ||
                         ghf__attr_int(rg, "factors", r->nf) < 0)) ||
            ghf__attr_int(rg, "iter", r->iter) < 0 || ghf__attr_int(rg, "dim", r->d) < 0 ||
            write_arr(rg, "cur", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, np, r->cur) < 0 ||
            write_arr(rg, "prev", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, np, r->prev) < 0 ||
            write_arr(rg, "trace", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, (hsize_t)r->iter, r->trace) < 0)
            rc = -1;
        if (H5Gclose(rg) < 0) rc = -1;
    }
    if (H5Gclose(g) < 0) rc = -1;
    if (rc || c->log_name) return rc; /* with a log, the finished fits are there */
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

/* The checkpoint as bytes: user block (signature, crc32 of the rest, size)
 * and the HDF5 image built in memory (core driver, no backing store). */
static unsigned char *build_image(const ghf_ckpt *c, size_t *len)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    unsigned char *buf = NULL;
    if (fapl < 0 || fcpl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 || H5Pset_userblock(fcpl, UB_SIZE) < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_LATEST) < 0)
        goto out;
    hid_t f = H5Fcreate(IMAGE_NAME, H5F_ACC_TRUNC, fcpl, fapl);
    if (f < 0) goto out;
    ssize_t n = -1;
    if (write_contents(f, c) == 0 && H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0) n = H5Fget_file_image(f, NULL, 0);
    if (n > 0) buf = calloc((size_t)n + UB_SIZE, 1);
    if (buf && H5Fget_file_image(f, buf + UB_SIZE, (size_t)n) != n) {
        free(buf);
        buf = NULL;
    }
    H5Fclose(f); /* in memory: nothing on disk to fail */
    if (buf) {
        *len = (size_t)n + UB_SIZE;
        memcpy(buf, UB_MAGIC, 8);
        put_u32(buf + 8, 1);
        put_u32(buf + 12, (uint32_t)crc32_z(0L, buf + UB_SIZE, (z_size_t)n));
        put_u64(buf + 16, (uint64_t)*len);
    }
out:
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    return buf;
}

/* Write bytes to a new file and fsync it; on failure the file is removed
 * and errno tells why (ENOSPC: the disk is full). */
static int write_new_file(const char *path, const unsigned char *b, size_t n)
{
    const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    size_t off = 0;
    int e = 0;
    while (off < n && !e) {
        const ssize_t k = write(fd, b + off, n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) e = errno;
        else if (k == 0) e = ENOSPC;
        else off += (size_t)k;
    }
    if (!e && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (e) {
        unlink(path);
        errno = e;
        return -1;
    }
    return 0;
}

int ghf_ckpt_write(const char *path, const ghf_ckpt *c, char *err, size_t errlen)
{
    ghf__h5_quiet();
    g_n_writes++;
    char tmp[4200], prev[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path); /* created exclusively (write_new_file) */
    ghf_ckpt_prev_path(path, prev, sizeof prev);
    size_t n = 0;
    unsigned char *img = build_image(c, &n);
    if (!img) {
        ghf__seterr(err, errlen, "%s: cannot build the checkpoint (out of memory?)", path);
        return 1;
    }
    /* a stale temporary file of a writer killed mid-write: replaced only if ours */
    if (access(tmp, F_OK) == 0 && ghf_ckpt_is_ours(tmp)) unlink(tmp);
    const int wrc = write_new_file(tmp, img, n);
    free(img);
    if (wrc && errno == EEXIST) {
        ghf__seterr(err, errlen, "%s: %s exists and is not a ghfit checkpoint: not replaced", path, tmp);
        return 1;
    }
    if (wrc) {
        ghf__seterr(err, errlen, "%s: writing the checkpoint failed: %s", path, strerror(errno));
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
    *out = ghf__attr_read_str(loc, name);
    return *out ? 0 : -1;
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
    char *fmt = NULL, *kind = NULL, *hash = NULL, *fp = NULL;
    int64_t ver = 0, v = 0;
    int rc = -1;
    if (read_attr_str(f, "format", &fmt) || strcmp(fmt, "ghfit-checkpoint") != 0) goto out;
    if (ghf__attr_read_i64(f, "format_version", &ver) || ver != GHF_CKPT_FORMAT_VERSION) goto out;
    if (read_attr_str(f, "kind", &kind) || read_attr_str(f, "data_file", &c->data_path) ||
        read_attr_str(f, "dataset", &c->dataset) || ghf__attr_read_i64(f, "n_rows", &c->n_rows) ||
        ghf__attr_read_i64(f, "dim", &v) || read_attr_str(f, "options_hash", &hash) ||
        ghf__attr_read_i64(f, "n_fits", &c->n_fits))
        goto out;
    if (v < 1 || v > GHF_D_MAX || c->n_rows < 1 || c->n_fits < 0 || c->n_fits > INT_MAX) goto out; /* bounded before any int */
    snprintf(c->kind, sizeof c->kind, "%s", kind);
    c->d = (int)v;
    c->hash = strtoull(hash, NULL, 16);
    if (read_attr_str(f, "data_fingerprint", &fp) || ghf__attr_read_i64(f, "data_fingerprint_rows", &c->data_fp_rows))
        goto out;
    c->data_fp = strtoull(fp, NULL, 16);
    const char *sums[2] = {"data_checksum", "weights_checksum"};
    uint64_t *dst[2] = {&c->data_sum, &c->weights_sum};
    for (int k = 0; k < 2; k++) { /* optional: absent in checkpoints of earlier versions */
        if (H5Aexists(f, sums[k]) <= 0) continue;
        free(fp);
        fp = NULL;
        if (read_attr_str(f, sums[k], &fp)) goto out;
        *dst[k] = strtoull(fp, NULL, 16);
    }
    if (H5Aexists(f, "done_log") > 0) {
        int64_t crc = 0;
        if (read_attr_str(f, "done_log", &c->log_name) || ghf__attr_read_i64(f, "done_bytes", &c->log_bytes) ||
            ghf__attr_read_i64(f, "done_crc", &crc) || ghf__attr_read_i64(f, "done_count", &c->log_count) || c->log_bytes < 0 ||
            c->log_count < 0 || crc < 0 || crc > (int64_t)UINT32_MAX || strchr(c->log_name, '/'))
            goto out;
        c->log_crc = (uint32_t)crc;
    }
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
        ok = ghf__attr_read_i64(rg, "index", &r->index) == 0 && read_attr_str(rg, "name", &name) == 0 &&
             ghf__attr_read_i64(rg, "iter", &it) == 0 && ghf__attr_read_i64(rg, "dim", &dd) == 0 && it >= 0 && it <= INT_MAX &&
             dd >= 1 && dd <= GHF_D_MAX;
        if (ok) {
            snprintf(r->name, sizeof r->name, "%s", name);
            char *fam = NULL;
            if (H5Aexists(rg, "family") > 0 && read_attr_str(rg, "family", &fam) == 0)
                snprintf(r->family, sizeof r->family, "%s", fam);
            free(fam);
            r->iter = (int)it;
            r->d = (int)dd;
            if (H5Aexists(rg, "factors") > 0) { /* a diag or factor fit */
                int64_t nf = -1;
                ok = ghf__attr_read_i64(rg, "factors", &nf) == 0 && nf >= 0 && nf < dd;
                r->nf = ok ? (int)nf : 0;
                r->disp = nf == 0 ? 1 : 2;
            }
            const int64_t np = ghf_ckpt_run_len(r->d, r->disp, r->nf);
            ok = ok && read_arr(rg, "cur", H5T_NATIVE_DOUBLE, sizeof(double), np, (void **)&r->cur, NULL) == 0 &&
                 read_arr(rg, "prev", H5T_NATIVE_DOUBLE, sizeof(double), np, (void **)&r->prev, NULL) == 0 &&
                 read_arr(rg, "trace", H5T_NATIVE_DOUBLE, sizeof(double), it, (void **)&r->trace, NULL) == 0;
        }
        free(name);
        H5Gclose(rg);
    }
    H5Gclose(g);
    if (!ok) goto out;
    if (c->log_name) { /* the finished fits are in the log (read by the caller) */
        rc = 0;
        goto out;
    }
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
    free(fp);
    return rc;
}


/* Signature, size and checksum of a checkpoint's bytes: NULL, or what is wrong. */
static const char *verify_image(const unsigned char *b, size_t n, char *why, size_t whylen)
{
    if (n >= 8 && memcmp(b, HDF5_MAGIC, 8) == 0) return "written by an older ghfit (checkpoint format 1)";
    if (n < UB_SIZE + 8 || memcmp(b, UB_MAGIC, 8) != 0) return "not a ghfit checkpoint";
    if (get_u32(b + 8) != 1) return "a checkpoint of an unknown format (newer ghfit?)";
    const uint64_t size = get_u64(b + 16);
    if (size != n) {
        snprintf(why, whylen, "damaged: %zu bytes where the checkpoint has %llu (truncated?)", n,
                 (unsigned long long)size);
        return why;
    }
    if ((uint32_t)crc32_z(0L, b + UB_SIZE, (z_size_t)(n - UB_SIZE)) != get_u32(b + 12))
        return "damaged: the checksum of its contents does not match";
    return NULL;
}

int ghf_ckpt_read(const char *path, ghf_ckpt *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    ghf__h5_quiet();
    unsigned char *b = NULL;
    size_t n = 0;
    if (ghf__read_regular(path, -1, &b, &n) != 0) {
        if (errno == ENOENT) ghf__seterr(err, errlen, "%s: no such checkpoint file", path);
        else if (errno == EINVAL) ghf__seterr(err, errlen, "%s: the checkpoint is not a regular file", path);
        else ghf__seterr(err, errlen, "%s: cannot read the checkpoint: %s", path, strerror(errno));
        return 2;
    }
    char why[256];
    const char *bad = verify_image(b, n, why, sizeof why);
    if (bad) {
        ghf__seterr(err, errlen, "%s: %s", path, bad);
        free(b);
        return 2;
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t f = -1;
    if (fapl >= 0 && H5Pset_fapl_core(fapl, 1 << 16, 0) >= 0 && H5Pset_file_image(fapl, b, n) >= 0)
        f = H5Fopen(IMAGE_NAME, H5F_ACC_RDONLY, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    free(b);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: the checkpoint's HDF5 contents cannot be opened (damaged?)", path);
        return 2;
    }
    const int rc = read_contents(f, c);
    H5Fclose(f);
    if (rc) {
        ghf_ckpt_free(c);
        ghf__seterr(err, errlen, "%s: not a ghfit checkpoint (format %d) or damaged", path, GHF_CKPT_FORMAT_VERSION);
        return 2;
    }
    if (c->log_name && ghf__ckpt_log_read(path, c, err, errlen) != 0) {
        ghf_ckpt_free(c);
        return 2;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * The data fingerprint
 * ------------------------------------------------------------------------- */

#define FP_ROWS 64

int ghf_ckpt_data_fingerprint(const char *path, const char *dataset, uint64_t *fp, int64_t *rows, char *err,
                              size_t errlen)
{
    ghf__h5_quiet();
    const char *dn = ghf__dsname(dataset);
    *fp = 0;
    *rows = 0;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot open the data file to fingerprint it for the checkpoint", path);
        return 2;
    }
    hid_t ds = H5Dopen2(f, dn, H5P_DEFAULT), fs = -1, ms = -1;
    hsize_t dims[2] = {0, 0};
    double *buf = NULL;
    int rc = 2;
    if (ds < 0 || (fs = H5Dget_space(ds)) < 0 || H5Sget_simple_extent_ndims(fs) != 2 ||
        H5Sget_simple_extent_dims(fs, dims, NULL) < 0 || dims[0] < 1 || dims[1] < 1)
        goto out;
    /* up to FP_ROWS rows spread evenly over the dataset, first and last included */
    const hsize_t k = dims[0] < FP_ROWS ? dims[0] : FP_ROWS;
    buf = malloc((size_t)k * (size_t)dims[1] * sizeof(double));
    if (!buf || H5Sselect_none(fs) < 0) goto out;
    for (hsize_t i = 0; i < k; i++) {
        const hsize_t start[2] = {k > 1 ? (hsize_t)((double)i * (double)(dims[0] - 1) / (double)(k - 1)) : 0, 0};
        const hsize_t count[2] = {1, dims[1]};
        if (H5Sselect_hyperslab(fs, H5S_SELECT_OR, start, NULL, count, NULL) < 0) goto out;
    }
    const hsize_t mdims[2] = {k, dims[1]};
    ms = H5Screate_simple(2, mdims, NULL);
    if (ms < 0 || H5Dread(ds, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf) < 0) goto out;
    const size_t nb = (size_t)k * (size_t)dims[1] * sizeof(double);
    const uint32_t c = (uint32_t)crc32_z(0L, (const unsigned char *)buf, (z_size_t)nb);
    const uint32_t a = (uint32_t)adler32_z(1L, (const unsigned char *)buf, (z_size_t)nb);
    *fp = ((uint64_t)c << 32) | a;
    *rows = (int64_t)k;
    rc = 0;
out:
    if (rc) ghf__seterr(err, errlen, "%s:%s: cannot read sample rows to fingerprint the data for the checkpoint", path, dn);
    free(buf);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (ds >= 0) H5Dclose(ds);
    H5Fclose(f);
    return rc;
}

/* ---------------------------------------------------------------------------
 * The checksum of every value (ghf_ckpt_rows_checksum)
 * ------------------------------------------------------------------------- */

#define SUM_PIECE_BYTES (4u << 20)

int ghf_ckpt_rows_checksum(const char *path, const char *dataset, int rank, int size, uint32_t *crc, uint32_t *adler,
                           int64_t *nbytes, char *err, size_t errlen)
{
    ghf__h5_quiet();
    const char *dn = ghf__dsname(dataset);
    *crc = (uint32_t)crc32_z(0L, Z_NULL, 0);
    *adler = (uint32_t)adler32_z(0L, Z_NULL, 0);
    *nbytes = 0;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot open the file to checksum it for the checkpoint", path);
        return 2;
    }
    hid_t ds = H5Dopen2(f, dn, H5P_DEFAULT), fs = -1, ft = -1, mt = -1;
    hsize_t dims[2] = {0, 1};
    unsigned char *buf = NULL;
    int rc = 2, nd = 0;
    if (ds < 0 || (fs = H5Dget_space(ds)) < 0 || (nd = H5Sget_simple_extent_ndims(fs)) < 1 || nd > 2 ||
        H5Sget_simple_extent_dims(fs, dims, NULL) < 0 || (ft = H5Dget_type(ds)) < 0 ||
        (mt = H5Tget_native_type(ft, H5T_DIR_ASCEND)) < 0)
        goto out;
    const size_t es = H5Tget_size(mt), row_bytes = (size_t)dims[1] * es;
    if (es < 1 || row_bytes < 1) goto out;
    int64_t row0 = 0, nrows = 0;
    ghf_block_range((int64_t)dims[0], rank, size, &row0, &nrows);
    const int64_t per = row_bytes >= SUM_PIECE_BYTES ? 1 : (int64_t)(SUM_PIECE_BYTES / row_bytes);
    buf = malloc((size_t)(nrows < per ? (nrows > 0 ? nrows : 1) : per) * row_bytes);
    if (!buf) goto out;
    uLong c = *crc, a = *adler;
    for (int64_t r = 0; r < nrows; r += per) {
        const int64_t k = nrows - r < per ? nrows - r : per;
        const hsize_t start[2] = {(hsize_t)(row0 + r), 0}, count[2] = {(hsize_t)k, dims[1]};
        hid_t ms = H5Screate_simple(nd, count, NULL);
        const int bad = ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
                        H5Dread(ds, mt, ms, fs, H5P_DEFAULT, buf) < 0;
        if (ms >= 0) H5Sclose(ms);
        if (bad) goto out;
        const size_t nb = (size_t)k * row_bytes;
        c = crc32_z(c, buf, (z_size_t)nb);
        a = adler32_z(a, buf, (z_size_t)nb);
        *nbytes += (int64_t)nb;
    }
    *crc = (uint32_t)c;
    *adler = (uint32_t)a;
    rc = 0;
out:
    if (rc) ghf__seterr(err, errlen, "%s:%s: cannot read every row to checksum the data for the checkpoint", path, dn);
    free(buf);
    if (mt >= 0) H5Tclose(mt);
    if (ft >= 0) H5Tclose(ft);
    if (fs >= 0) H5Sclose(fs);
    if (ds >= 0) H5Dclose(ds);
    H5Fclose(f);
    return rc;
}

uint64_t ghf_ckpt_checksum_combine(int n, const uint32_t *crc, const uint32_t *adler, const int64_t *nbytes)
{
    uLong c = crc32_z(0L, Z_NULL, 0), a = adler32_z(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        c = crc32_combine(c, crc[i], (z_off_t)nbytes[i]);
        a = adler32_combine(a, adler[i], (z_off_t)nbytes[i]);
    }
    const uint64_t v = ((uint64_t)(uint32_t)c << 32) | (uint32_t)a;
    return v ? v : 1;
}
