/* h5common.c - helpers shared by the HDF5 readers and writers: error
 * messages, status agreement across ranks, dataset inspection, string
 * attributes, writable-directory checks, fsync. */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, getpid, gmtime_r, mkdtemp */
#endif

/* standard headers */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* this module */
#include "h5internal.h"

#define GHF__MSGLEN 1024

void ghf__h5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void ghf__seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    /* one line: strip trailing newlines, replace inner ones */
    size_t n = strlen(err);
    while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == '\r')) err[--n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (err[i] == '\n' || err[i] == '\r') err[i] = ' ';
}

int ghf__agree(MPI_Comm comm, int status, char *err, size_t errlen)
{
    int rank = 0, size = 1, st = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Allreduce(&status, &st, 1, MPI_INT, MPI_MAX, comm);
    if (st == 0) return 0;
    int mine = (status == st) ? rank : size, src = 0;
    MPI_Allreduce(&mine, &src, 1, MPI_INT, MPI_MIN, comm);
    char buf[GHF__MSGLEN];
    memset(buf, 0, sizeof buf);
    if (rank == src && err && errlen) {
        strncpy(buf, err, sizeof buf - 1);
    }
    MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, src, comm);
    if (buf[0] == '\0') snprintf(buf, sizeof buf, "unknown error on rank %d", src);
    if (err && errlen) {
        strncpy(err, buf, errlen - 1);
        err[errlen - 1] = '\0';
    }
    return st;
}

const char *ghf__dsname(const char *dataset)
{
    return (dataset && *dataset) ? dataset : GHF__DEFAULT_DATASET;
}

/* ---------------------------------------------------------------------------
 * Dataset inspection (serial driver)
 * ------------------------------------------------------------------------- */

static const char *class_name(H5T_class_t c)
{
    switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_TIME: return "time";
    case H5T_STRING: return "string";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_COMPOUND: return "compound";
    case H5T_REFERENCE: return "reference";
    case H5T_ENUM: return "enum";
    case H5T_VLEN: return "variable-length";
    case H5T_ARRAY: return "array";
    default: return "unknown";
    }
}

/* Collects up to a few root member names for "no such dataset" messages. */
typedef struct name_list {
    char   buf[256];
    int    count;
} name_list;

static herr_t list_cb(hid_t g, const char *name, const H5L_info_t *info, void *op)
{
    (void)g;
    (void)info;
    name_list *nl = (name_list *)op;
    if (nl->count >= 6) {
        if (nl->count == 6) strncat(nl->buf, ", ...", sizeof nl->buf - strlen(nl->buf) - 1);
        nl->count++;
        return 1; /* stop */
    }
    if (nl->count > 0) strncat(nl->buf, ", ", sizeof nl->buf - strlen(nl->buf) - 1);
    strncat(nl->buf, "/", sizeof nl->buf - strlen(nl->buf) - 1);
    strncat(nl->buf, name, sizeof nl->buf - strlen(nl->buf) - 1);
    nl->count++;
    return 0;
}

int ghf__inspect(const char *path, const char *dataset, ghf__dsinfo *info,
                 char *err, size_t errlen)
{
    ghf__h5_quiet();
    memset(info, 0, sizeof *info);
    const char *dn = ghf__dsname(dataset);
    if (!path || !*path) {
        ghf__seterr(err, errlen, "no input file given (dataset %s)", dn);
        return 2;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot open file: %s", path, dn, strerror(errno));
        return 2;
    }
    if (S_ISDIR(st.st_mode)) {
        ghf__seterr(err, errlen, "%s:%s: is a directory, not an HDF5 file", path, dn);
        return 2;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        ghf__seterr(err, errlen, "%s:%s: cannot read file: %s", path, dn, strerror(errno));
        return 2;
    }
    fclose(fp);
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) {
        ghf__seterr(err, errlen, "%s:%s: not an HDF5 file (no HDF5 signature found)", path, dn);
        return 2;
    }

    int rc = 2;
    hid_t fapl = -1, f = -1, ds = -1, type = -1, space = -1, dcpl = -1;
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        ghf__seterr(err, errlen, "%s:%s: HDF5 property list creation failed", path, dn);
        return 1;
    }
    H5Pset_file_locking(fapl, 1, 1);
    f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s:%s: HDF5 file is truncated or corrupt (cannot be opened)",
                    path, dn);
        goto done;
    }
    ds = H5Dopen2(f, dn, H5P_DEFAULT);
    if (ds < 0) {
        hid_t o = H5Oopen(f, dn, H5P_DEFAULT);
        if (o >= 0) {
            H5I_type_t t = H5Iget_type(o);
            ghf__seterr(err, errlen, "%s:%s: is a %s, not a dataset", path, dn,
                        t == H5I_GROUP ? "group" : t == H5I_DATATYPE ? "named datatype" : "non-dataset object");
            H5Oclose(o);
        } else {
            name_list nl;
            memset(&nl, 0, sizeof nl);
            hsize_t idx = 0;
            H5Literate(f, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, list_cb, &nl);
            ghf__seterr(err, errlen, "%s:%s: no such dataset (the root group holds: %s)", path, dn,
                        nl.count ? nl.buf : "nothing");
        }
        goto done;
    }
    type = H5Dget_type(ds);
    H5T_class_t cls = H5Tget_class(type);
    size_t sz = H5Tget_size(type);
    if (cls == H5T_FLOAT) {
        if (sz != 4 && sz != 8) {
            ghf__seterr(err, errlen, "%s:%s: %d-bit floating point is not supported (float32 or float64 expected)",
                        path, dn, (int)(8 * sz));
            goto done;
        }
        info->cls = 0;
    } else if (cls == H5T_INTEGER) {
        if (sz != 1 && sz != 2 && sz != 4 && sz != 8) {
            ghf__seterr(err, errlen, "%s:%s: %d-bit integers are not supported", path, dn, (int)(8 * sz));
            goto done;
        }
        info->cls = (H5Tget_sign(type) == H5T_SGN_NONE) ? 2 : 1;
    } else {
        ghf__seterr(err, errlen, "%s:%s: element type is %s, not numeric (float32, float64 or integer expected)",
                    path, dn, class_name(cls));
        goto done;
    }
    info->size = (int)sz;
    space = H5Dget_space(ds);
    H5S_class_t scls = H5Sget_simple_extent_type(space);
    int nd = H5Sget_simple_extent_ndims(space);
    if (scls != H5S_SIMPLE || nd < 0) {
        ghf__seterr(err, errlen, "%s:%s: dataset has a %s dataspace, expected a 2-D matrix (rows x columns)",
                    path, dn, scls == H5S_SCALAR ? "scalar" : "null");
        goto done;
    }
    hsize_t dims[H5S_MAX_RANK];
    H5Sget_simple_extent_dims(space, dims, NULL);
    if (nd != 2) {
        char shape[128] = "";
        for (int i = 0; i < nd && i < 6; i++) {
            char one[32];
            snprintf(one, sizeof one, "%s%llu", i ? " x " : "", (unsigned long long)dims[i]);
            strncat(shape, one, sizeof shape - strlen(shape) - 1);
        }
        ghf__seterr(err, errlen, "%s:%s: dataset is %d-D (shape %s), expected 2-D (rows x columns)",
                    path, dn, nd, shape);
        goto done;
    }
    if (dims[0] == 0 || dims[1] == 0) {
        ghf__seterr(err, errlen, "%s:%s: dataset is empty (shape %llu x %llu)", path, dn,
                    (unsigned long long)dims[0], (unsigned long long)dims[1]);
        goto done;
    }
    if (dims[1] > 1000000 || dims[0] > (hsize_t)INT64_MAX) {
        ghf__seterr(err, errlen, "%s:%s: dataset shape %llu x %llu is too large", path, dn,
                    (unsigned long long)dims[0], (unsigned long long)dims[1]);
        goto done;
    }
    info->n = (int64_t)dims[0];
    info->d = (int64_t)dims[1];
    dcpl = H5Dget_create_plist(ds);
    info->chunked = (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED);
    rc = 0;
done:
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (ds >= 0) H5Dclose(ds);
    if (f >= 0) H5Fclose(f);
    if (fapl >= 0) H5Pclose(fapl);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Paths
 * ------------------------------------------------------------------------- */

/* malloc'd directory part of path ("." when there is none). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = (char *)malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

int ghf__check_writable(const char *final_path, char *err, size_t errlen)
{
    if (!final_path || !*final_path) {
        ghf__seterr(err, errlen, "no output file given");
        return 2;
    }
    size_t len = strlen(final_path);
    if (final_path[len - 1] == '/') {
        ghf__seterr(err, errlen, "%s: output path names a directory, not a file", final_path);
        return 2;
    }
    struct stat st;
    if (stat(final_path, &st) == 0 && S_ISDIR(st.st_mode)) {
        ghf__seterr(err, errlen, "%s: output path is an existing directory", final_path);
        return 2;
    }
    char *dir = dir_of(final_path);
    if (!dir) {
        ghf__seterr(err, errlen, "%s: out of memory", final_path);
        return 1;
    }
    int rc = 0;
    if (stat(dir, &st) != 0) {
        ghf__seterr(err, errlen, "%s: cannot write output: directory %s: %s", final_path, dir, strerror(errno));
        rc = 2;
    } else if (!S_ISDIR(st.st_mode)) {
        ghf__seterr(err, errlen, "%s: cannot write output: %s is not a directory", final_path, dir);
        rc = 2;
    } else {
        /* access() is not enough (root, read-only mounts, /proc): try it. */
        size_t n = len + 64;
        char *probe = (char *)malloc(n);
        if (!probe) {
            free(dir);
            ghf__seterr(err, errlen, "%s: out of memory", final_path);
            return 1;
        }
        snprintf(probe, n, "%s.tmp.%ld.probe", final_path, (long)getpid());
        int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) {
            ghf__seterr(err, errlen, "%s: cannot create files in directory %s: %s", final_path, dir,
                        strerror(errno));
            rc = 2;
        } else {
            close(fd);
            unlink(probe);
        }
        free(probe);
    }
    free(dir);
    return rc;
}

int ghf__fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int ghf__fsync_parent(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) return -1;
    int rc = ghf__fsync_path(dir);
    free(dir);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Attributes
 * ------------------------------------------------------------------------- */

static int attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, const void *buf)
{
    hid_t s = H5Screate(H5S_SCALAR);
    if (s < 0) return -1;
    hid_t a = H5Acreate2(loc, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
    int rc = -1;
    if (a >= 0) {
        rc = (H5Awrite(a, mtype, buf) < 0) ? -1 : 0;
        if (H5Aclose(a) < 0) rc = -1;
    }
    H5Sclose(s);
    return rc;
}

int ghf__attr_str(hid_t loc, const char *name, const char *val)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    const char *v = val ? val : "";
    int rc = attr_write(loc, name, t, t, &v);
    H5Tclose(t);
    return rc;
}

int ghf__attr_i64(hid_t loc, const char *name, int64_t v)
{
    return attr_write(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int ghf__attr_int(hid_t loc, const char *name, int v)
{
    return attr_write(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT, &v);
}

int ghf__attr_f64(hid_t loc, const char *name, double v)
{
    return attr_write(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

/* ---------------------------------------------------------------------------
 * Piece size and I/O-mode bookkeeping (test hooks)
 * ------------------------------------------------------------------------- */

#define GHF__DEFAULT_PIECE_BYTES ((size_t)1 << 30)

static size_t   g_piece_bytes = GHF__DEFAULT_PIECE_BYTES;
static int      g_last_mode = -1;
static uint32_t g_last_cause = 0;
static int      g_last_pieces = 0;

void ghf__h5_set_max_piece_bytes(size_t bytes)
{
    g_piece_bytes = bytes ? bytes : GHF__DEFAULT_PIECE_BYTES;
}

size_t ghf__h5_max_piece_bytes(void) { return g_piece_bytes; }

void ghf__h5_record_io_mode(hid_t dxpl)
{
    H5D_mpio_actual_io_mode_t mode;
    uint32_t local = 0, global = 0;
    if (H5Pget_mpio_actual_io_mode(dxpl, &mode) >= 0) g_last_mode = (int)mode;
    if (H5Pget_mpio_no_collective_cause(dxpl, &local, &global) >= 0) g_last_cause = local | global;
}

int      ghf__h5_last_io_mode(void) { return g_last_mode; }
uint32_t ghf__h5_last_no_coll_cause(void) { return g_last_cause; }
int      ghf__h5_last_n_pieces(void) { return g_last_pieces; }
void     ghf__h5_set_last_n_pieces(int n) { g_last_pieces = n; }

char *ghf__h5_begin(MPI_Comm comm, char *err, size_t *errlen, char *lbuf, size_t lbuflen, int *rank,
                    int *size)
{
    if (!err || *errlen == 0) {
        err = lbuf;
        *errlen = lbuflen;
    }
    err[0] = '\0';
    ghf__h5_quiet();
    ghf__h5_set_last_n_pieces(0);
    MPI_Comm_rank(comm, rank);
    MPI_Comm_size(comm, size);
    return err;
}
