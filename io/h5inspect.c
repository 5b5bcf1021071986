/* h5inspect.c - what rank 0 checks about an input dataset (serial driver)
 * before any rank opens it collectively: a regular, readable HDF5 file not
 * locked by a writer; links that resolve; a 2-D numeric dataset; storage that
 * parallel HDF5 can read (no virtual or external storage, every filter
 * present, every chunk written).  Each refusal is one message naming the
 * file, the dataset and the cause (status 2). */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup */
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

const char *ghf__file_type_name(mode_t m)
{
    if (S_ISREG(m)) return "regular file";
    if (S_ISDIR(m)) return "directory";
    if (S_ISFIFO(m)) return "FIFO (named pipe)";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    if (S_ISSOCK(m)) return "socket";
    return "special file";
}

/* ---------------------------------------------------------------------------
 * The file: regular, readable, HDF5, not locked by a writer
 * ------------------------------------------------------------------------- */

/* Status 0 with *f open, or 2 with a message. */
static int open_file(const char *path, const char *dn, hid_t *f, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        struct stat lst;
        if (errno == ENOENT && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
            ghf__seterr(err, errlen, "%s:%s: cannot open file: it is a symbolic link whose target does not exist",
                        path, dn);
        else
            ghf__seterr(err, errlen, "%s:%s: cannot open file: %s", path, dn, strerror(errno));
        return 2;
    }
    if (S_ISDIR(st.st_mode)) {
        ghf__seterr(err, errlen, "%s:%s: is a directory, not an HDF5 file", path, dn);
        return 2;
    }
    if (!S_ISREG(st.st_mode)) { /* a FIFO would block the first open(): refuse before any */
        ghf__seterr(err, errlen, "%s:%s: is a %s, not a regular file (ghfit reads HDF5 files only)", path, dn,
                    ghf__file_type_name(st.st_mode));
        return 2;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot read file: %s", path, dn, strerror(errno));
        return 2;
    }
    close(fd);
    if (H5Fis_hdf5(path) <= 0) {
        ghf__seterr(err, errlen, "%s:%s: not an HDF5 file (no HDF5 signature found)", path, dn);
        return 2;
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        ghf__seterr(err, errlen, "%s:%s: HDF5 property list creation failed", path, dn);
        return 1;
    }
    H5Pset_file_locking(fapl, 1, 1);
    *f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    /* a writer's lock, or a file shorter than its superblock records */
    const int named = *f < 0 && ghf__explain_open_failure(path, dn, err, errlen);
    H5Pclose(fapl);
    if (*f >= 0) return 0;
    if (!named) ghf__seterr(err, errlen, "%s:%s: HDF5 file is truncated or corrupt (cannot be opened)", path, dn);
    return 2;
}

/* ---------------------------------------------------------------------------
 * The dataset's path: say why it does not lead to a dataset
 * ------------------------------------------------------------------------- */

/* Collects up to a few member names of a group for "no such dataset" messages. */
typedef struct name_list {
    char buf[256];
    int  count;
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
    strncat(nl->buf, name, sizeof nl->buf - strlen(nl->buf) - 1);
    nl->count++;
    return 0;
}

/* 1 if the external file `name`, linked from `path`, can be found where
 * HDF5 looks for it: HDF5_EXT_PREFIX, the linking file's directory, as given. */
static int ext_file_found(const char *path, const char *name)
{
    struct stat st;
    if (name[0] == '/' && stat(name, &st) == 0) return 1;
    const char *base = name[0] == '/' ? strrchr(name, '/') + 1 : name;
    char cand[4096];
    const char *pre = getenv("HDF5_EXT_PREFIX");
    while (pre && *pre) {
        const char *colon = strchr(pre, ':');
        const size_t n = colon ? (size_t)(colon - pre) : strlen(pre);
        snprintf(cand, sizeof cand, "%.*s/%s", (int)n, pre, base);
        if (stat(cand, &st) == 0) return 1;
        pre = colon ? colon + 1 : NULL;
    }
    const char *slash = strrchr(path, '/');
    if (slash) {
        snprintf(cand, sizeof cand, "%.*s/%s", (int)(slash - path), path, base);
        if (stat(cand, &st) == 0) return 1;
    }
    return stat(base, &st) == 0;
}

/* One link on the way to the dataset does not resolve: message for it. */
static void explain_link(hid_t f, const char *path, const char *dn, const char *prefix, char *err, size_t errlen)
{
    H5L_info_t li;
    if (H5Lget_info(f, prefix, &li, H5P_DEFAULT) < 0) {
        ghf__seterr(err, errlen, "%s:%s: the link %s cannot be read (file corrupt?)", path, dn, prefix);
        return;
    }
    if (li.type == H5L_TYPE_SOFT) {
        char val[1024] = "";
        H5Lget_val(f, prefix, val, sizeof val - 1, H5P_DEFAULT);
        ghf__seterr(err, errlen, "%s:%s: %s is a soft link to %s, which does not exist (dangling link)", path, dn,
                    prefix, val);
        return;
    }
    if (li.type == H5L_TYPE_EXTERNAL) {
        char buf[2048] = "";
        const char *file = "?", *obj = "?";
        unsigned flags = 0;
        if (li.u.val_size < sizeof buf && H5Lget_val(f, prefix, buf, sizeof buf, H5P_DEFAULT) >= 0)
            H5Lunpack_elink_val(buf, li.u.val_size, &flags, &file, &obj);
        if (!ext_file_found(path, file))
            ghf__seterr(err, errlen, "%s:%s: %s is an external link to %s:%s, and the file %s does not exist", path,
                        dn, prefix, file, obj, file);
        else
            ghf__seterr(err, errlen,
                        "%s:%s: %s is an external link to %s:%s, which cannot be opened (no such object there, or "
                        "the file is not readable HDF5)",
                        path, dn, prefix, file, obj);
        return;
    }
    ghf__seterr(err, errlen, "%s:%s: %s cannot be opened (file corrupt?)", path, dn, prefix);
}

/* Why `dn` cannot be opened as a dataset: walks its path link by link. */
static void explain_missing(hid_t f, const char *path, const char *dn, char *err, size_t errlen)
{
    char prefix[1024];
    const size_t len = strlen(dn);
    if (len >= sizeof prefix) {
        ghf__seterr(err, errlen, "%s:%.200s...: dataset name too long", path, dn);
        return;
    }
    for (size_t e = 1; e <= len; e++) {
        if (e < len && dn[e] != '/') continue;
        memcpy(prefix, dn, e);
        prefix[e] = '\0';
        if (e > 0 && prefix[e - 1] == '/') continue; /* "//" or the root */
        const htri_t ex = H5Lexists(f, prefix, H5P_DEFAULT);
        if (ex <= 0) {
            char parent[1024];
            const char *slash = strrchr(prefix, '/');
            if (slash && slash != prefix)
                snprintf(parent, sizeof parent, "%.*s", (int)(slash - prefix), prefix);
            else
                snprintf(parent, sizeof parent, "/");
            name_list nl;
            memset(&nl, 0, sizeof nl);
            hsize_t idx = 0;
            H5Literate_by_name(f, parent, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, list_cb, &nl, H5P_DEFAULT);
            if (!strcmp(parent, "/"))
                ghf__seterr(err, errlen, "%s:%s: no such dataset (the root group holds: %s)", path, dn,
                            nl.count ? nl.buf : "nothing");
            else
                ghf__seterr(err, errlen, "%s:%s: no such dataset (the group %s holds: %s)", path, dn, parent,
                            nl.count ? nl.buf : "nothing");
            return;
        }
        if (H5Oexists_by_name(f, prefix, H5P_DEFAULT) <= 0) {
            explain_link(f, path, dn, prefix, err, errlen);
            return;
        }
    }
    hid_t o = H5Oopen(f, dn, H5P_DEFAULT);
    const H5I_type_t t = o >= 0 ? H5Iget_type(o) : H5I_BADID;
    if (o >= 0) H5Oclose(o);
    ghf__seterr(err, errlen, "%s:%s: is a %s, not a dataset", path, dn,
                t == H5I_GROUP ? "group" : t == H5I_DATATYPE ? "named datatype" : "non-dataset object");
}

/* ---------------------------------------------------------------------------
 * Element type and shape
 * ------------------------------------------------------------------------- */

static int check_type(hid_t ds, const char *path, const char *dn, ghf__dsinfo *info, char *err, size_t errlen)
{
    hid_t type = H5Dget_type(ds);
    const H5T_class_t cls = H5Tget_class(type);
    const size_t sz = H5Tget_size(type);
    const int sign = cls == H5T_INTEGER ? (int)H5Tget_sign(type) : 0;
    H5Tclose(type);
    if (cls == H5T_FLOAT) {
        if (sz != 4 && sz != 8) {
            ghf__seterr(err, errlen, "%s:%s: %d-bit floating point is not supported (float32 or float64 expected)",
                        path, dn, (int)(8 * sz));
            return 2;
        }
        info->cls = 0;
    } else if (cls == H5T_INTEGER) {
        if (sz != 1 && sz != 2 && sz != 4 && sz != 8) {
            ghf__seterr(err, errlen, "%s:%s: %d-bit integers are not supported", path, dn, (int)(8 * sz));
            return 2;
        }
        info->cls = (sign == H5T_SGN_NONE) ? 2 : 1;
    } else {
        ghf__seterr(err, errlen, "%s:%s: element type is %s, not numeric (float32, float64 or integer expected)",
                    path, dn, class_name(cls));
        return 2;
    }
    info->size = (int)sz;
    return 0;
}

static int check_shape(hid_t ds, const char *path, const char *dn, ghf__dsinfo *info, char *err, size_t errlen)
{
    hid_t space = H5Dget_space(ds);
    const H5S_class_t scls = H5Sget_simple_extent_type(space);
    const int nd = H5Sget_simple_extent_ndims(space);
    hsize_t dims[H5S_MAX_RANK];
    if (scls == H5S_SIMPLE && nd > 0) H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    if (scls != H5S_SIMPLE || nd < 0) {
        ghf__seterr(err, errlen, "%s:%s: dataset has a %s dataspace, expected a 2-D matrix (rows x columns)", path,
                    dn, scls == H5S_SCALAR ? "scalar" : "null");
        return 2;
    }
    if (nd == 1 && dims[0] > 0) { /* a vector: n x 1 (ghf_read_opts.vector; data refuse it in read_shard) */
        info->n = (int64_t)dims[0];
        info->d = 1;
        info->ndims = 1;
        return 0;
    }
    if (nd != 2) {
        char shape[128] = "";
        for (int i = 0; i < nd && i < 6; i++) {
            char one[32];
            snprintf(one, sizeof one, "%s%llu", i ? " x " : "", (unsigned long long)dims[i]);
            strncat(shape, one, sizeof shape - strlen(shape) - 1);
        }
        ghf__seterr(err, errlen, "%s:%s: dataset is %d-D (shape %s), expected 2-D (rows x columns)", path, dn, nd,
                    shape);
        return 2;
    }
    if (dims[0] == 0 || dims[1] == 0) {
        ghf__seterr(err, errlen, "%s:%s: dataset is empty (shape %llu x %llu)", path, dn,
                    (unsigned long long)dims[0], (unsigned long long)dims[1]);
        return 2;
    }
    if (dims[1] > GHF__MAX_COLS || dims[0] > (hsize_t)INT64_MAX / 16 / dims[1]) {
        ghf__seterr(err, errlen, "%s:%s: dataset shape %llu x %llu is too large (at most %d columns)", path, dn,
                    (unsigned long long)dims[0], (unsigned long long)dims[1], GHF__MAX_COLS);
        return 2;
    }
    info->n = (int64_t)dims[0];
    info->d = (int64_t)dims[1];
    info->ndims = 2;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Storage: virtual, external, filters, unwritten chunks
 * ------------------------------------------------------------------------- */

/* Chunked: every chunk must have been written (reading unwritten chunks
 * collectively hangs parallel HDF5 1.10.8).  Names the first missing rows. */
static int check_chunks(hid_t ds, hid_t dcpl, const char *path, const char *dn, const ghf__dsinfo *info,
                        char *err, size_t errlen)
{
    hsize_t cdims[2] = {1, 1};
    if (H5Pget_chunk(dcpl, 2, cdims) != info->ndims || cdims[0] == 0 || (info->ndims == 2 && cdims[1] == 0)) {
        ghf__seterr(err, errlen, "%s:%s: the chunk shape cannot be read (file corrupt?)", path, dn);
        return 2;
    }
    const hsize_t nr = ((hsize_t)info->n + cdims[0] - 1) / cdims[0];
    if (info->ndims == 1) cdims[1] = 1;
    const hsize_t nc = ((hsize_t)info->d + cdims[1] - 1) / cdims[1];
    hsize_t have = 0;
    hid_t space = H5Dget_space(ds);
    const herr_t r = H5Dget_num_chunks(ds, space, &have);
    H5Sclose(space);
    if (r < 0) {
        ghf__seterr(err, errlen, "%s:%s: the chunk index cannot be read (file corrupt?)", path, dn);
        return 2;
    }
    if (have >= nr * nc) return 0;
    for (hsize_t i = 0; i < nr; i++)
        for (hsize_t j = 0; j < nc; j++) {
            hsize_t off[2] = {i * cdims[0], j * cdims[1]}, sz = 0;
            if (H5Dget_chunk_storage_size(ds, off, &sz) >= 0 && sz > 0) continue;
            const hsize_t end = off[0] + cdims[0] < (hsize_t)info->n ? off[0] + cdims[0] : (hsize_t)info->n;
            ghf__seterr(err, errlen,
                        "%s:%s: %llu of the %llu chunks were never written (the first missing one holds rows "
                        "[%llu, %llu)); ghfit reads only fully written datasets: write every row (or repack the "
                        "file with its fill values, e.g. h5repack -l %s:CONTI)",
                        path, dn, (unsigned long long)(nr * nc - have), (unsigned long long)(nr * nc),
                        (unsigned long long)off[0], (unsigned long long)end, dn);
            return 2;
        }
    return 0;
}

static int check_storage(hid_t ds, const char *path, const char *dn, ghf__dsinfo *info, char *err, size_t errlen)
{
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0) {
        ghf__seterr(err, errlen, "%s:%s: the dataset's creation properties cannot be read", path, dn);
        return 2;
    }
    int rc = 0;
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    info->chunked = layout == H5D_CHUNKED;
    if (layout == H5D_VIRTUAL) {
        ghf__seterr(err, errlen,
                    "%s:%s: is a virtual dataset (it maps data held in other datasets or files), which ghfit "
                    "cannot read in parallel: copy its data into a plain dataset first",
                    path, dn);
        rc = 2;
    } else if (H5Pget_external_count(dcpl) > 0) {
        char ext[256] = "?";
        off_t off = 0;
        hsize_t size = 0;
        H5Pget_external(dcpl, 0, sizeof ext, ext, &off, &size);
        ghf__seterr(err, errlen,
                    "%s:%s: keeps its raw data outside the HDF5 file (external storage in %s), which ghfit "
                    "cannot read in parallel: copy it into a plain dataset first (e.g. h5repack -l %s:CONTI)",
                    path, dn, ext, dn);
        rc = 2;
    } else if ((rc = ghf__check_filters(dcpl, path, dn, err, errlen)) == 0) {
        if (layout == H5D_CHUNKED) {
            rc = check_chunks(ds, dcpl, path, dn, info, err, errlen);
        } else if (layout == H5D_CONTIGUOUS) {
            H5D_space_status_t ss = H5D_SPACE_STATUS_ERROR;
            if (H5Dget_space_status(ds, &ss) >= 0 && ss == H5D_SPACE_STATUS_NOT_ALLOCATED) {
                ghf__seterr(err, errlen,
                            "%s:%s: holds no data: the dataset was created but never written (every value "
                            "would be the fill value)",
                            path, dn);
                rc = 2;
            }
        }
    }
    H5Pclose(dcpl);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Entry point
 * ------------------------------------------------------------------------- */

/* The last successful inspection: a sweep reads many windows of one file,
 * and counting the chunks of a large chunked dataset costs a pass over its
 * chunk index.  Reused while the file (device, inode, size, mtime), its
 * name and the dataset name are unchanged. */
static struct {
    int valid;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    char path[4096], dataset[1024];
    ghf__dsinfo info;
} g_last;

static int same_as_last(const char *path, const char *dn, const struct stat *st)
{
    return g_last.valid && g_last.dev == st->st_dev && g_last.ino == st->st_ino && g_last.size == st->st_size &&
           g_last.mtime.tv_sec == st->st_mtim.tv_sec && g_last.mtime.tv_nsec == st->st_mtim.tv_nsec &&
           !strcmp(g_last.path, path) && !strcmp(g_last.dataset, dn);
}

static void remember(const char *path, const char *dn, const struct stat *st, const ghf__dsinfo *info)
{
    g_last.valid = strlen(path) < sizeof g_last.path && strlen(dn) < sizeof g_last.dataset;
    if (!g_last.valid) return;
    g_last.dev = st->st_dev;
    g_last.ino = st->st_ino;
    g_last.size = st->st_size;
    g_last.mtime = st->st_mtim;
    snprintf(g_last.path, sizeof g_last.path, "%s", path);
    snprintf(g_last.dataset, sizeof g_last.dataset, "%s", dn);
    g_last.info = *info;
}

int ghf__inspect(const char *path, const char *dataset, ghf__dsinfo *info, char *err, size_t errlen)
{
    ghf__h5_quiet();
    memset(info, 0, sizeof *info);
    const char *dn = ghf__dsname(dataset);
    if (!path || !*path) {
        ghf__seterr(err, errlen, "no input file given (dataset %s)", dn);
        return 2;
    }
    struct stat st0;
    if (stat(path, &st0) == 0 && S_ISREG(st0.st_mode) && same_as_last(path, dn, &st0)) {
        *info = g_last.info;
        return 0;
    }
    hid_t f = -1;
    int rc = open_file(path, dn, &f, err, errlen);
    if (rc) return rc;
    hid_t ds = H5Dopen2(f, dn, H5P_DEFAULT);
    if (ds < 0) {
        explain_missing(f, path, dn, err, errlen);
        H5Fclose(f);
        return 2;
    }
    rc = check_type(ds, path, dn, info, err, errlen);
    if (!rc) rc = check_shape(ds, path, dn, info, err, errlen);
    if (!rc) rc = check_storage(ds, path, dn, info, err, errlen);
    if (!rc) {
        /* the file that holds the data (another one behind an external link) */
        if (H5Fget_name(ds, info->file, sizeof info->file) <= 0) info->file[0] = '\0';
    }
    H5Dclose(ds);
    H5Fclose(f);
    if (!rc && S_ISREG(st0.st_mode)) remember(path, dn, &st0, info);
    return rc;
}
