/* h5gen.c - collective write of an N x d matrix (`ghfit generate`).
 *
 * No HDF5 call ever writes to a disk that can fill up (HDF5 1.10.8 hangs or
 * crashes at exit after a failed write; see ghf__h5_mem_save):
 *   1. rank 0 builds the file's metadata in memory (a contiguous dataset,
 *      allocated late, never filled) and saves it to "<path>.tmp.<pid>"
 *      (created exclusively) with plain POSIX writes;
 *   2. rank 0 reserves the whole file on disk (fallocate; where the file
 *      system cannot, it checks the free space), reopens it with the serial
 *      driver and allocates the dataset's storage by writing one element:
 *      every byte HDF5 writes lies in reserved space;
 *   3. all ranks write their rows with collective MPI-IO
 *      (MPI_File_write_at_all) at the dataset's offset, in pieces, in the
 *      file's element type (float32 data converted by us);
 *   4. rank 0 renames the file into place.
 * Every failure is agreed on by all ranks before the next collective call,
 * and the temporary file is removed. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate */
#endif

/* standard headers */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* this module */
#include "ghf_version.h"
#include "h5internal.h"

/* One dataset of a file written in parallel: n rows of d columns (rank 1
 * when d == 0: a vector of n), es bytes per element on disk (8 float64,
 * 4 float32, 1 uint8), this rank's rows at x (doubles, or bytes for uint8),
 * and its string attributes. */
typedef struct gen_ds {
    const char *name;
    int64_t n;
    int d;
    int es;
    const void *x;
    int n_attrs;
    const char *const *keys, *const *vals;
    int64_t offset; /* in the file, once allocated */
    int64_t block;  /* vectors of doubles: 0, or the sub-block layout of ghf_h5_column */
    int stride, col;
    int int32;      /* es 4: int32 values (x holds int32_t), not float32 converted from doubles */
} gen_ds;

static hid_t gen_type(const gen_ds *g)
{
    return g->int32 ? H5T_NATIVE_INT32 : g->es == 4 ? H5T_NATIVE_FLOAT : g->es == 1 ? H5T_NATIVE_UINT8 : H5T_NATIVE_DOUBLE;
}

static int gen_cols(const gen_ds *g) { return g->d > 0 ? g->d : 1; }

/* A root attribute of the skeleton: string, float64 or int64. */
static int gen_root_attr(hid_t f, const ghf_h5_attr *a)
{
    if (a->type == GHF_H5_ATTR_F64) return ghf__attr_f64(f, a->key, a->f64);
    if (a->type == GHF_H5_ATTR_I64) return ghf__attr_i64(f, a->key, a->i64);
    return ghf__attr_str(f, a->key, a->str ? a->str : "");
}

/* One dataset of the skeleton (contiguous, allocated late, never filled, no
 * time stamps: the same bytes on every run).  0, or 1/2 with a message. */
static int skeleton_ds(hid_t f, const char *path, const gen_ds *g, char *err, size_t errlen)
{
    hsize_t dims[2] = {(hsize_t)g->n, (hsize_t)gen_cols(g)};
    hid_t fspace = H5Screate_simple(g->d > 0 ? 2 : 1, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    H5Pset_obj_track_times(dcpl, 0);
    hid_t ds = H5Dcreate2(f, g->name, gen_type(g), fspace, lcpl, dcpl, H5P_DEFAULT);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(fspace);
    if (ds < 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot create the dataset (invalid name?)", path, g->name);
        return 2;
    }
    int st = 0;
    for (int i = 0; st == 0 && i < g->n_attrs; i++)
        if (ghf__attr_str(ds, g->keys[i], g->vals[i]) < 0) {
            ghf__seterr(err, errlen, "%s:%s: cannot write attribute '%s' (duplicate name?)", path, g->name,
                        g->keys[i]);
            st = 2;
        }
    H5Dclose(ds);
    return st;
}

/* Rank 0, step 1: the metadata in memory, saved to a new temporary file.
 * Status 0 with *tmp, or 1/2 with a message. */
static int make_skeleton(const char *path, const char *what, const gen_ds *gs, int nds, const char *signature, int n_root,
                         const ghf_h5_attr *root, char **tmp, char *err, size_t errlen)
{
    ghf__memfile *mf = NULL;
    hid_t f = ghf__h5_mem_create(path, H5F_LIBVER_EARLIEST, &mf);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s: cannot create the file in memory", what);
        return 1;
    }
    int st = 0;
    for (int k = 0; st == 0 && k < nds; k++) st = skeleton_ds(f, path, &gs[k], err, errlen);
    if (st == 0 && ghf__attr_str(f, signature, GHFIT_VERSION) < 0) {
        ghf__seterr(err, errlen, "%s: cannot write the root attribute %s", path, signature);
        st = 1;
    }
    for (int i = 0; st == 0 && i < n_root; i++)
        if (gen_root_attr(f, &root[i]) < 0) {
            ghf__seterr(err, errlen, "%s: cannot write the root attribute %s", path, root[i].key);
            st = 2;
        }
    if (st) {
        ghf__h5_mem_discard(f, mf);
        return st;
    }
    char why[256] = "";
    if (ghf__h5_mem_save(f, mf, path, tmp, why, sizeof why) != 0) {
        ghf__seterr(err, errlen, "%s: cannot write the temporary file: %s", what, why);
        return 1;
    }
    return 0;
}

/* Test hook GHFIT_TEST_WRITE_SLEEP=S: rank 0 sleeps S seconds once the
 * temporary file exists, before the rows are written (tests/faults_signals.sh). */
static void test_write_sleep(const char *tmp)
{
    const char *s = getenv("GHFIT_TEST_WRITE_SLEEP");
    const double sec = s ? atof(s) : 0;
    if (sec <= 0) return;
    fprintf(stderr, "ghfit: test: %s created; sleeping %.1f s before the rows are written\n", tmp, sec);
    fflush(stderr);
    struct timespec ts = {(time_t)sec, (long)((sec - (double)(time_t)sec) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Rank 0, step 2: reserve the datasets' bytes beyond the skeleton on disk,
 * then let HDF5 allocate each dataset; gs[k].offset receives its file
 * offset.  0, or 1 with a message. */
static int reserve_and_allocate(const char *tmp, const char *what, gen_ds *gs, int nds, char *err, size_t errlen)
{
    struct stat st;
    int64_t bytes = 0;
    for (int k = 0; k < nds; k++) bytes += gs[k].n * gen_cols(&gs[k]) * gs[k].es;
    const int fd = open(tmp, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        ghf__seterr(err, errlen, "%s: cannot reopen %s: %s", what, tmp, strerror(errno));
        if (fd >= 0) close(fd);
        return 1;
    }
    const off_t total = st.st_size + (off_t)bytes + 65536;
    int e = fallocate(fd, 0, 0, total) == 0 ? 0 : errno;
    if (e == EOPNOTSUPP || e == ENOSYS) { /* no reservation here: at least the free space must suffice */
        struct statvfs vs;
        e = fstatvfs(fd, &vs) == 0 && (double)vs.f_bavail * (double)vs.f_frsize < (double)total ? ENOSPC : 0;
    }
    close(fd);
    if (e) {
        const double mb = (double)total / 1e6;
        ghf__seterr(err, errlen, "%s: cannot reserve %.3g %s for the file: %s", what, mb < 1e3 ? mb : mb / 1e3,
                    mb < 1e3 ? "MB" : "GB", strerror(e));
        return 1;
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, 0, 1); /* our own temporary file */
    hid_t f = H5Fopen(tmp, H5F_ACC_RDWR, fapl);
    H5Pclose(fapl);
    int rc = f < 0, bad = 0;
    for (int k = 0; !rc && k < nds; k++) {
        hid_t ds = H5Dopen2(f, gs[k].name, H5P_DEFAULT);
        rc = ds < 0;
        bad = k;
        if (rc) break;
        /* one element written allocates the contiguous storage (no fill) */
        double zero = 0.0; /* 8 zero bytes: any element type */
        hsize_t one[2] = {1, 1}, at[2] = {0, 0};
        hid_t ms = H5Screate_simple(gs[k].d > 0 ? 2 : 1, one, NULL), fs = H5Dget_space(ds);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, at, NULL, one, NULL);
        rc = H5Dwrite(ds, gen_type(&gs[k]), ms, fs, H5P_DEFAULT, &zero) < 0;
        H5Sclose(ms);
        H5Sclose(fs);
        const haddr_t a = rc ? HADDR_UNDEF : H5Dget_offset(ds);
        rc = rc || a == HADDR_UNDEF;
        gs[k].offset = rc ? 0 : (int64_t)a;
        if (H5Dclose(ds) < 0) rc = 1;
    }
    if (f >= 0 && H5Fclose(f) < 0) rc = 1;
    if (rc) ghf__seterr(err, errlen, "%s: cannot allocate the dataset %s in %s", what, nds ? gs[bad].name : "/", tmp);
    return rc;
}

/* Rows [lr0, lr0 + cnt) of a sub-block vector g (of nrows rows) into buf. */
static const void *gather_rows(const gen_ds *g, int64_t nrows, int64_t lr0, int64_t cnt, double *buf)
{
    const double *x = (const double *)g->x;
    const int64_t B = g->block;
    for (int64_t i = lr0; i < lr0 + cnt;) {
        const int64_t b = i / B, j = i % B, nb = nrows - b * B < B ? nrows - b * B : B;
        int64_t k = nb - j;
        if (k > lr0 + cnt - i) k = lr0 + cnt - i;
        memcpy(buf + (i - lr0), x + b * B * g->stride + g->col * nb + j, (size_t)k * sizeof(double));
        i += k;
    }
    return buf;
}

/* All ranks, step 3: one dataset's rows [row0, row0 + nrows) at its offset,
 * in pieces.  0, or 1 (this rank's failure). */
static int write_rows(MPI_File fh, MPI_Comm comm, const gen_ds *g, int64_t row0, int64_t nrows)
{
    const int d = gen_cols(g), es = g->es;
    const int64_t row_bytes = (int64_t)d * es;
    int64_t piece_rows = (int64_t)(ghf__h5_max_piece_bytes() / (size_t)row_bytes);
    if (piece_rows < 1) piece_rows = 1;
    if (piece_rows > (int64_t)(INT32_MAX / d)) piece_rows = INT32_MAX / d;
    int64_t my_pieces = (nrows + piece_rows - 1) / piece_rows, n_pieces = 0;
    MPI_Allreduce(&my_pieces, &n_pieces, 1, MPI_INT64_T, MPI_MAX, comm);
    const int cvt = es == 4 && !g->int32; /* float32 is converted from doubles */
    const MPI_Datatype mt = g->int32 ? MPI_INT32_T : es == 4 ? MPI_FLOAT : es == 1 ? MPI_UNSIGNED_CHAR : MPI_DOUBLE;
    const int src_es = es == 1 ? 1 : g->int32 ? 4 : 8;
    float *fbuf = NULL;
    int bad = 0;
    if ((cvt || g->block > 0) && nrows > 0) {
        fbuf = (float *)malloc((size_t)(nrows < piece_rows ? nrows : piece_rows) * (size_t)d *
                               (es == 4 ? sizeof(float) : sizeof(double)));
        bad = !fbuf;
    }
    for (int64_t p = 0; p < n_pieces; p++) {
        const int64_t lr0 = p * piece_rows;
        const int64_t cnt = bad || lr0 >= nrows ? 0 : (nrows - lr0 < piece_rows ? nrows - lr0 : piece_rows);
        const void *buf = g->x ? (const void *)((const char *)g->x + lr0 * d * src_es) : (const void *)&bad;
        if (cnt > 0 && cvt) {
            const double *src = (const double *)g->x + lr0 * d;
            const int64_t m = cnt * d;
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < m; i++) fbuf[i] = (float)src[i];
            buf = fbuf;
        }
        if (cnt > 0 && g->block > 0) /* gather the piece from its sub-blocks */
            buf = gather_rows(g, nrows, lr0, cnt, (double *)fbuf);
        MPI_Status ms;
        const MPI_Offset at = (MPI_Offset)(g->offset + (row0 + lr0) * row_bytes);
        const int rc = MPI_File_write_at_all(fh, at, buf, (int)(cnt * d), mt, &ms);
        int got = 0;
        MPI_Get_count(&ms, mt, &got);
        if (rc != MPI_SUCCESS || (cnt > 0 && got != (int)(cnt * d))) bad = 1;
    }
    ghf__h5_set_last_n_pieces((int)n_pieces);
    free(fbuf);
    return bad;
}

/* All ranks, step 3: every dataset, then sync and close.  0, or 1 with a
 * message (this rank's). */
static int write_all(MPI_Comm comm, const char *tmp, const char *what, const gen_ds *gs, int nds, int64_t row0,
                     int64_t nrows, char *err, size_t errlen)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_File fh;
    const int orc = MPI_File_open(comm, tmp, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    if (orc != MPI_SUCCESS) {
        ghf__seterr(err, errlen, "%s: cannot open %s with MPI-IO on rank %d", what, tmp, rank);
        return 1;
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    int bad = 0;
    for (int k = 0; k < nds; k++) bad |= write_rows(fh, comm, &gs[k], row0, nrows);
    if (MPI_File_sync(fh) != MPI_SUCCESS) bad = 1;
    if (MPI_File_close(&fh) != MPI_SUCCESS) bad = 1;
    if (bad) ghf__seterr(err, errlen, "%s: writing %s failed on rank %d (disk full or I/O error)", what, tmp, rank);
    return bad;
}

/* Steps 1-4 for checked arguments: collective.  0, 1 or 2 (agreed). */
static int gen_write(MPI_Comm comm, int rank, const char *path, const char *what, gen_ds *gs, int nds, const char *signature,
                     int n_root, const ghf_h5_attr *root, int64_t row0, int64_t nrows, char *err, size_t errlen)
{
    int st = 0;
    if (rank == 0) st = ghf__check_writable(path, err, errlen);
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) return st;

    /* --- rank 0: skeleton and reservation --------------------------------------- */
    char *tmp = NULL;
    if (rank == 0) {
        st = make_skeleton(path, what, gs, nds, signature, n_root, root, &tmp, err, errlen);
        if (st == 0) st = reserve_and_allocate(tmp, what, gs, nds, err, errlen);
        if (st == 0) test_write_sleep(tmp);
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        if (tmp) unlink(tmp);
        ghf__tmp_release(tmp);
        return st;
    }
    char tname[4200] = "";
    if (rank == 0) snprintf(tname, sizeof tname, "%s", tmp);
    MPI_Bcast(tname, (int)sizeof tname, MPI_CHAR, 0, comm);
    for (int k = 0; k < nds; k++) MPI_Bcast(&gs[k].offset, 1, MPI_INT64_T, 0, comm);

    /* --- all ranks: the rows ------------------------------------------------------ */
    st = write_all(comm, tname, what, gs, nds, row0, nrows, err, errlen);
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        if (rank == 0) unlink(tname);
        ghf__tmp_release(tmp);
        return st;
    }

    /* --- rank 0: rename into place -------------------------------------------------- */
    if (rank == 0) {
        if (rename(tname, path) != 0) {
            ghf__seterr(err, errlen, "%s: cannot rename %s into place: %s", what, tname, strerror(errno));
            unlink(tname);
            st = 1;
        } else {
            ghf__fsync_parent(path);
        }
    }
    ghf__tmp_release(tmp);
    return ghf__agree(comm, st, err, errlen);
}

int ghf_h5_write_matrix(MPI_Comm comm, const char *path, const char *dataset, int64_t n, int d,
                        int64_t row0, int64_t nrows, const double *x, int dtype_bits,
                        int n_attrs, const char *const *attr_keys, const char *const *attr_vals,
                        char *err, size_t errlen)
{
    char lbuf[1024];
    int rank = 0, size = 1;
    err = ghf__h5_begin(comm, err, &errlen, lbuf, sizeof lbuf, &rank, &size);
    const char *dn = ghf__dsname(dataset);
    const char *pn = path ? path : "(null)";

    /* --- argument checks ----------------------------------------------------- */
    int st = 0;
    if (!path || !*path) {
        ghf__seterr(err, errlen, "no output file given for dataset %s", dn);
        st = 2;
    } else if (n <= 0 || d <= 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot write an empty matrix (%" PRId64 " x %d)", pn, dn, n, d);
        st = 2;
    } else if (dtype_bits != 32 && dtype_bits != 64) {
        ghf__seterr(err, errlen, "%s:%s: dtype must be float32 or float64 (got %d bits)", pn, dn, dtype_bits);
        st = 2;
    } else if (row0 < 0 || nrows < 0 || row0 > n || nrows > n - row0) {
        ghf__seterr(err, errlen, "%s:%s: rank %d rows [%" PRId64 ", %" PRId64 ") outside [0, %" PRId64 ")",
                    pn, dn, rank, row0, row0 + nrows, n);
        st = 2;
    } else if (nrows > 0 && !x) {
        ghf__seterr(err, errlen, "%s:%s: rank %d passed no data for %" PRId64 " rows", pn, dn, rank, nrows);
        st = 2;
    } else if (n_attrs < 0 || (n_attrs > 0 && (!attr_keys || !attr_vals))) {
        ghf__seterr(err, errlen, "%s:%s: invalid attribute list", pn, dn);
        st = 2;
    } else {
        for (int i = 0; i < n_attrs; i++)
            if (!attr_keys[i] || !*attr_keys[i] || !attr_vals[i]) {
                ghf__seterr(err, errlen, "%s:%s: attribute %d has no name or value", pn, dn, i);
                st = 2;
                break;
            }
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) return st;
    int64_t total = 0;
    MPI_Allreduce(&nrows, &total, 1, MPI_INT64_T, MPI_SUM, comm);
    if (total != n) {
        ghf__seterr(err, errlen, "%s:%s: ranks hold %" PRId64 " rows in all, expected %" PRId64, pn, dn, total, n);
        return 2;
    }
    const int es = dtype_bits / 8;
    if (n > (INT64_MAX / 2) / d / es) {
        ghf__seterr(err, errlen, "%s:%s: %" PRId64 " x %d values do not fit in a file", pn, dn, n, d);
        return 2;
    }
    static const char *const dkey[] = {"description"};
    static const char *const dval[] = {"data matrix: rows are observations, columns are dimensions"};
    int has_desc = 0;
    for (int i = 0; i < n_attrs; i++) has_desc |= strcmp(attr_keys[i], "description") == 0;
    char what[4200];
    snprintf(what, sizeof what, "%s:%s", pn, dn);
    gen_ds g[1] = {{dn, n, d, es, x, n_attrs, attr_keys, attr_vals, 0, 0, 0, 0, 0}};
    if (!has_desc && n_attrs == 0) {
        g[0].n_attrs = 1;
        g[0].keys = dkey;
        g[0].vals = dval;
    }
    /* the attributes given, then the description when they have none */
    const char **keys = NULL, **vals = NULL;
    if (!has_desc && n_attrs > 0) {
        keys = (const char **)malloc((size_t)(n_attrs + 1) * sizeof *keys);
        vals = (const char **)malloc((size_t)(n_attrs + 1) * sizeof *vals);
        const int oom = ghf__agree(comm, !keys || !vals, err, errlen);
        if (oom) {
            free(keys);
            free(vals);
            ghf__seterr(err, errlen, "%s: out of memory", what);
            return 1;
        }
        for (int i = 0; i < n_attrs; i++) {
            keys[i] = attr_keys[i];
            vals[i] = attr_vals[i];
        }
        keys[n_attrs] = dkey[0];
        vals[n_attrs] = dval[0];
        g[0].n_attrs = n_attrs + 1;
        g[0].keys = keys;
        g[0].vals = vals;
    }
    st = gen_write(comm, rank, path, what, g, 1, GHF_MATRIX_SIGNATURE, 0, NULL, row0, nrows, err, errlen);
    free(keys);
    free(vals);
    return st;
}

int ghf_h5_write_columns(MPI_Comm comm, const char *path, const char *signature, int64_t n, int64_t row0,
                         int64_t nrows, int n_cols, const ghf_h5_column *cols, int n_root, const ghf_h5_attr *root,
                         char *err, size_t errlen)
{
    char lbuf[1024];
    int rank = 0, size = 1;
    err = ghf__h5_begin(comm, err, &errlen, lbuf, sizeof lbuf, &rank, &size);
    const char *pn = path ? path : "(null)";
    int st = 0;
    if (!path || !*path || !signature || n <= 0 || n_cols < 1 || n_cols > 16 || !cols || n_root < 0 ||
        (n_root > 0 && !root)) {
        ghf__seterr(err, errlen, "%s: invalid arguments for a column file", pn);
        st = 2;
    } else if (row0 < 0 || nrows < 0 || row0 > n || nrows > n - row0) {
        ghf__seterr(err, errlen, "%s: rank %d rows [%" PRId64 ", %" PRId64 ") outside [0, %" PRId64 ")", pn, rank,
                    row0, row0 + nrows, n);
        st = 2;
    } else {
        for (int k = 0; k < n_cols; k++)
            if (!cols[k].name || (nrows > 0 && !cols[k].data) || cols[k].width < 0 ||
                ((cols[k].width > 0 || cols[k].int32) && (cols[k].block != 0 || cols[k].uint8)) ||
                (cols[k].block != 0 && (cols[k].block < 0 || cols[k].col < 0 || cols[k].col >= cols[k].stride))) {
                ghf__seterr(err, errlen, "%s: column %d has no name or no data on rank %d", pn, k, rank);
                st = 2;
            }
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) return st;
    int64_t total = 0;
    MPI_Allreduce(&nrows, &total, 1, MPI_INT64_T, MPI_SUM, comm);
    if (total != n) {
        ghf__seterr(err, errlen, "%s: ranks hold %" PRId64 " rows in all, expected %" PRId64, pn, total, n);
        return 2;
    }
    if (n > INT64_MAX / 64) {
        ghf__seterr(err, errlen, "%s: %" PRId64 " rows do not fit in a file", pn, n);
        return 2;
    }
    gen_ds g[16];
    const char *dkey[16], *dval[16];
    for (int k = 0; k < n_cols; k++) {
        dkey[k] = "description";
        dval[k] = cols[k].description ? cols[k].description : "";
        g[k] = (gen_ds){cols[k].name, n, cols[k].width, cols[k].uint8 ? 1 : cols[k].int32 ? 4 : 8, cols[k].data,
                        cols[k].description ? 1 : 0, &dkey[k], &dval[k], 0, cols[k].uint8 ? 0 : cols[k].block,
                        cols[k].stride, cols[k].col, cols[k].int32 != 0};
    }
    return gen_write(comm, rank, path, pn, g, n_cols, signature, n_root, root, row0, nrows, err, errlen);
}
