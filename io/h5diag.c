/* h5diag.c - why an HDF5 open or read failed, named where it can be: before
 * any "truncated or corrupt?" fallback, the causes that can be established
 * are ruled out (issue 25): a filter this HDF5 build cannot decode (szip
 * named, with the h5repack conversion), a file changed since it was opened,
 * a file shorter than its own data or than its superblock records, a file
 * that cannot be read (permissions), a lock held by a writer. */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

/* standard headers */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* this module */
#include "h5internal.h"

/* ---------------------------------------------------------------------------
 * The HDF5 error stack (read first: any later HDF5 call clears it)
 * ------------------------------------------------------------------------- */

static herr_t facts_cb(unsigned n, const H5E_error2_t *e, void *op)
{
    (void)n;
    ghf__stack_facts *f = (ghf__stack_facts *)op;
    if (e->maj_num == H5E_PLINE) f->pline = 1;
    if (e->min_num == H5E_CANTLOCKFILE) f->locked = 1;
    const char *t = e->desc ? strstr(e->desc, "truncated file: eof = ") : NULL;
    if (t) {
        const char *s = strstr(t, "stored_eof = ");
        long long a = -1, b = -1;
        if (sscanf(t, "truncated file: eof = %lld", &a) == 1 && s && sscanf(s, "stored_eof = %lld", &b) == 1) {
            f->eof = a;
            f->stored_eof = b;
        }
    }
    return 0;
}

ghf__stack_facts ghf__h5_stack_facts(void)
{
    ghf__stack_facts f = {0, 0, -1, -1};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, facts_cb, &f);
    return f;
}

/* ---------------------------------------------------------------------------
 * Filters
 * ------------------------------------------------------------------------- */

const char *ghf__filter_name(H5Z_filter_t id, const char *stored)
{
    switch (id) {
    case H5Z_FILTER_DEFLATE: return "deflate (gzip)";
    case H5Z_FILTER_SHUFFLE: return "shuffle";
    case H5Z_FILTER_FLETCHER32: return "fletcher32";
    case H5Z_FILTER_SZIP: return "szip";
    case H5Z_FILTER_NBIT: return "nbit";
    case H5Z_FILTER_SCALEOFFSET: return "scaleoffset";
    case 307: return "bzip2";
    case 32000: return "LZF";
    case 32001: return "Blosc";
    case 32004: return "LZ4";
    case 32008: return "bitshuffle";
    case 32013: return "ZFP";
    case 32015: return "Zstandard";
    case 32017: return "SZ";
    case 32026: return "Blosc2";
    default: return stored && *stored ? stored : "unregistered";
    }
}

static H5Z_filter_t g_hidden = -1;
void ghf__h5_set_hidden_filter(H5Z_filter_t id) { g_hidden = id; }

/* 2 if this HDF5 can decode filter id, 1 if it has the filter without its
 * decoder, 0 if it does not have it */
static int can_decode(H5Z_filter_t id)
{
    if (id == g_hidden || H5Zfilter_avail(id) <= 0) return 0;
    unsigned cfg = 0;
    if (H5Zget_filter_info(id, &cfg) < 0) return 2; /* registered: let the read tell */
    return (cfg & H5Z_FILTER_CONFIG_DECODE_ENABLED) ? 2 : 1;
}

/* The message for filter id that this HDF5 build cannot decode (registered:
 * it has the filter, without a decoder). */
static void filter_message(H5Z_filter_t id, const char *stored, int registered, const char *path, const char *dn,
                           char *err, size_t errlen)
{
    if (id == H5Z_FILTER_SZIP)
        ghf__seterr(err, errlen,
                    "%s:%s: the data are compressed with the szip filter (id 4), which is not available to this "
                    "HDF5 build (%s): convert the file where szip is available, e.g. h5repack -f NONE %s "
                    "plain.h5 (or -f GZIP=4), and give ghfit plain.h5",
                    path, dn, registered ? "it has szip without the decoder" : "it was built without szip/libaec",
                    path);
    else if (registered)
        ghf__seterr(err, errlen,
                    "%s:%s: the data are compressed with the %s filter (id %d), which this HDF5 library has "
                    "without its decoder: install a plugin of that filter that decodes and point "
                    "HDF5_PLUGIN_PATH to it, or rewrite the file without it (e.g. h5repack -f NONE)",
                    path, dn, ghf__filter_name(id, stored), (int)id);
    else
        ghf__seterr(err, errlen,
                    "%s:%s: the data are compressed with the %s filter (id %d), which this HDF5 library does "
                    "not have: install that filter plugin and point HDF5_PLUGIN_PATH to it, or rewrite the "
                    "file without it (e.g. h5repack -f NONE)",
                    path, dn, ghf__filter_name(id, stored), (int)id);
}

int ghf__check_filters(hid_t dcpl, const char *path, const char *dn, char *err, size_t errlen)
{
    const int nf = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf; i++) {
        unsigned flags = 0, cd[16];
        size_t ncd = 16;
        char name[128] = "";
        const H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL);
        if (id < 0) {
            ghf__seterr(err, errlen, "%s:%s: filter %d of the dataset cannot be read (file corrupt?)", path, dn, i);
            return 2;
        }
        const int c = can_decode(id);
        if (c < 2) {
            filter_message(id, name, c == 1, path, dn, err, errlen);
            return 2;
        }
    }
    return 0;
}

/* The first filter of ds's pipeline (name into buf), or -1 when none. */
static H5Z_filter_t first_filter(hid_t dcpl, char *buf, size_t n)
{
    buf[0] = '\0';
    if (H5Pget_nfilters(dcpl) <= 0) return -1;
    unsigned flags = 0, cd[16];
    size_t ncd = 16;
    return H5Pget_filter2(dcpl, 0, &flags, &ncd, cd, n, buf, NULL);
}

/* ---------------------------------------------------------------------------
 * Open failures
 * ------------------------------------------------------------------------- */

int ghf__explain_open_failure(const char *path, const char *dn, char *err, size_t errlen)
{
    const ghf__stack_facts sf = ghf__h5_stack_facts();
    const char *sep = dn && *dn ? ":" : "";
    dn = dn ? dn : "";
    if (sf.locked) {
        ghf__seterr(err, errlen,
                    "%s%s%s: the file is locked by another process that has it open for writing (HDF5 file "
                    "locking); wait until it is closed, or, if you know it is complete, set "
                    "HDF5_USE_FILE_LOCKING=FALSE",
                    path, sep, dn);
        return 1;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        ghf__seterr(err, errlen, "%s%s%s: cannot read file: %s", path, sep, dn, strerror(errno));
        return 1;
    }
    close(fd);
    if (sf.eof >= 0 && sf.stored_eof > sf.eof) {
        ghf__seterr(err, errlen,
                    "%s%s%s: HDF5 file is truncated or corrupt (cannot be opened): it is truncated, %lld bytes "
                    "where its superblock records %lld (an interrupted copy or write?)",
                    path, sep, dn, sf.eof, sf.stored_eof);
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Read failures
 * ------------------------------------------------------------------------- */

int ghf__stat_changed(const struct stat *a, const struct stat *b)
{
    return a->st_dev != b->st_dev || a->st_ino != b->st_ino || a->st_size != b->st_size ||
           a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec;
}

/* The end (bytes) of the raw data of rows [r0, r1) of ds (2-D, or 1-D),
 * or -1 when it cannot be told. */
static long long data_end(hid_t ds, hid_t dcpl, int64_t r0, int64_t r1)
{
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout == H5D_CONTIGUOUS) {
        const haddr_t a = H5Dget_offset(ds);
        const hsize_t s = H5Dget_storage_size(ds);
        return a == HADDR_UNDEF ? -1 : (long long)(a + s);
    }
    if (layout != H5D_CHUNKED) return -1;
    hid_t sp = H5Dget_space(ds);
    const int nd = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[2] = {0, 1}, cd[2] = {1, 1};
    if (nd >= 1 && nd <= 2) H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    if (nd < 1 || nd > 2 || H5Pget_chunk(dcpl, 2, cd) != nd || cd[0] == 0 || (nd == 2 && cd[1] == 0)) return -1;
    long long end = -1;
    int64_t looked = 0;
    for (hsize_t i = (hsize_t)r0 / cd[0] * cd[0]; i < (hsize_t)r1 && looked < 100000; i += cd[0])
        for (hsize_t j = 0; j < (nd == 2 ? dims[1] : 1) && looked < 100000; j += (nd == 2 ? cd[1] : 1)) {
            hsize_t off[2] = {i, j};
            unsigned mask = 0;
            haddr_t addr = HADDR_UNDEF;
            hsize_t size = 0;
            looked++;
            if (H5Dget_chunk_info_by_coord(ds, off, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF) continue;
            if ((long long)(addr + size) > end) end = (long long)(addr + size);
        }
    return end;
}

/* The first block of chunk rows in [r0, r1) that cannot be read: 0 with
 * [*a, *b), or -1 when not found (or too large to look for). */
static int first_bad_rows(hid_t ds, hid_t dcpl, int64_t r0, int64_t r1, int64_t *a, int64_t *b)
{
    if (H5Pget_layout(dcpl) != H5D_CHUNKED) return -1;
    hid_t fs = H5Dget_space(ds);
    const int nd = H5Sget_simple_extent_ndims(fs);
    hsize_t dims[2] = {0, 1}, cd[2] = {1, 1};
    int rc = -1;
    if (nd >= 1 && nd <= 2 && H5Sget_simple_extent_dims(fs, dims, NULL) >= 0 && H5Pget_chunk(dcpl, 2, cd) == nd &&
        cd[0] > 0 && (hsize_t)r1 <= dims[0] && (double)cd[0] * (double)dims[1] * 8.0 <= 64.0 * 1048576.0) {
        double *buf = (double *)malloc((size_t)(cd[0] * dims[1]) * sizeof(double));
        int64_t looked = 0;
        for (hsize_t i = (hsize_t)r0 / cd[0] * cd[0]; buf && i < (hsize_t)r1 && looked < 100000; i += cd[0], looked++) {
            const hsize_t lo = i < (hsize_t)r0 ? (hsize_t)r0 : i;
            const hsize_t hi = i + cd[0] < (hsize_t)r1 ? i + cd[0] : (hsize_t)r1;
            hsize_t off[2] = {lo, 0}, cnt[2] = {hi - lo, dims[1]};
            hid_t ms = H5Screate_simple(nd, cnt, NULL);
            const herr_t r = H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0
                                 ? -1
                                 : H5Dread(ds, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf);
            H5Sclose(ms);
            if (r < 0) {
                *a = (int64_t)lo;
                *b = (int64_t)hi;
                rc = 0;
                break;
            }
        }
        free(buf);
    }
    H5Sclose(fs);
    return rc;
}

void ghf__explain_read_failure(const char *path, const char *dn, const struct stat *st_open,
                               const ghf__stack_facts *sf, int64_t r0, int64_t r1, const char *fallback, char *err,
                               size_t errlen)
{
    /* 1. the file changed since it was opened */
    struct stat now;
    const int have_now = stat(path, &now) == 0;
    if (st_open && !have_now) {
        ghf__seterr(err, errlen,
                    "%s:%s: reading rows [%" PRId64 ", %" PRId64 ") failed: the file was removed or renamed "
                    "while ghfit was reading it (%s): an input must stay in place during a run",
                    path, dn, r0, r1, strerror(errno));
        return;
    }
    if (st_open && ghf__stat_changed(st_open, &now)) {
        ghf__seterr(err, errlen,
                    "%s:%s: reading rows [%" PRId64 ", %" PRId64 ") failed: the file changed while ghfit was "
                    "reading it (%lld bytes when opened, %lld now%s): an input must not be rewritten during a "
                    "run",
                    path, dn, r0, r1, (long long)st_open->st_size, (long long)now.st_size,
                    st_open->st_size == now.st_size ? ", modified since" : "");
        return;
    }
    /* 2. permissions (an open file stays readable, a later open does not) */
    if (have_now && access(path, R_OK) != 0) {
        ghf__seterr(err, errlen,
                    "%s:%s: reading rows [%" PRId64 ", %" PRId64 ") failed: the file is not readable: %s", path,
                    dn, r0, r1, strerror(errno));
        return;
    }
    ghf__seterr(err, errlen, "%s", fallback);
    /* the rest needs the file's metadata: opened again, serially */
    ghf__h5_quiet();
    hid_t f = have_now ? ghf__h5_open_ro(path) : -1;
    hid_t ds = f >= 0 ? H5Dopen2(f, dn, H5P_DEFAULT) : -1;
    hid_t dcpl = ds >= 0 ? H5Dget_create_plist(ds) : -1;
    char fname[128];
    H5Z_filter_t f0 = -1;
    long long end = -1;
    if (dcpl >= 0) {
        /* 3. a filter this build cannot decode */
        if (ghf__check_filters(dcpl, path, dn, err, errlen) != 0) goto done;
        /* 4. shorter than its own data */
        end = data_end(ds, dcpl, r0, r1);
        f0 = first_filter(dcpl, fname, sizeof fname);
    }
    if (end > (long long)now.st_size) {
        ghf__seterr(err, errlen,
                    "%s:%s: reading rows [%" PRId64 ", %" PRId64 ") failed: the file is truncated (%lld bytes; "
                    "the data of these rows extend to byte %lld)",
                    path, dn, r0, r1, (long long)now.st_size, end);
    } else if (sf && sf->pline && f0 >= 0) {
        /* 5. the filter pipeline failed although every filter is there:
         * the first rows whose chunk cannot be decoded */
        int64_t a = r0, b = r1;
        if (first_bad_rows(ds, dcpl, r0, r1, &a, &b) == 0) {
            r0 = a;
            r1 = b;
        }
        ghf__seterr(err, errlen,
                    "%s:%s: reading rows [%" PRId64 ", %" PRId64 ") failed in the %s filter (id %d): the "
                    "compressed data cannot be decoded (corrupt chunks, or written with settings this HDF5 "
                    "build's filter does not support)",
                    path, dn, r0, r1, ghf__filter_name(f0, fname), (int)f0);
    }
done:
    if (dcpl >= 0) H5Pclose(dcpl);
    if (ds >= 0) H5Dclose(ds);
    if (f >= 0) H5Fclose(f);
}
