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
#include <unistd.h>

/* this module */
#include "ghf_version.h"
#include "h5internal.h"

/* Rank 0, step 1: the metadata in memory, saved to a new temporary file.
 * Status 0 with *tmp, or 1/2 with a message. */
static int make_skeleton(const char *path, const char *dn, int64_t n, int d, int es, int n_attrs,
                         const char *const *keys, const char *const *vals, char **tmp, char *err, size_t errlen)
{
    ghf__memfile *mf = NULL;
    hid_t f = ghf__h5_mem_create(path, H5F_LIBVER_EARLIEST, &mf);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot create the file in memory", path, dn);
        return 1;
    }
    hsize_t dims[2] = {(hsize_t)n, (hsize_t)d};
    hid_t fspace = H5Screate_simple(2, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t ds = H5Dcreate2(f, dn, es == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, fspace, lcpl, dcpl, H5P_DEFAULT);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(fspace);
    int st = 0;
    if (ds < 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot create the dataset (invalid name?)", path, dn);
        st = 2;
    }
    for (int i = 0; st == 0 && i < n_attrs; i++)
        if (ghf__attr_str(ds, keys[i], vals[i]) < 0) {
            ghf__seterr(err, errlen, "%s:%s: cannot write attribute '%s' (duplicate name?)", path, dn, keys[i]);
            st = 2;
        }
    if (st == 0 && H5Aexists(ds, "description") <= 0 &&
        ghf__attr_str(ds, "description", "data matrix: rows are observations, columns are dimensions") < 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot write attribute 'description'", path, dn);
        st = 1;
    }
    if (st == 0 && ghf__attr_str(f, GHF_MATRIX_SIGNATURE, GHFIT_VERSION) < 0) {
        ghf__seterr(err, errlen, "%s: cannot write the root attribute %s", path, GHF_MATRIX_SIGNATURE);
        st = 1;
    }
    if (ds >= 0) H5Dclose(ds);
    if (st) {
        ghf__h5_mem_discard(f, mf);
        return st;
    }
    char why[256] = "";
    if (ghf__h5_mem_save(f, mf, path, tmp, why, sizeof why) != 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot write the temporary file: %s", path, dn, why);
        return 1;
    }
    return 0;
}

/* Rank 0, step 2: reserve `bytes` more than the skeleton on disk, then let
 * HDF5 allocate the dataset; *offset receives the dataset's file offset.
 * 0, or 1 with a message. */
static int reserve_and_allocate(const char *tmp, const char *path, const char *dn, int64_t bytes, int es,
                                int64_t *offset, char *err, size_t errlen)
{
    struct stat st;
    const int fd = open(tmp, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot reopen %s: %s", path, dn, tmp, strerror(errno));
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
        ghf__seterr(err, errlen, "%s:%s: cannot reserve %.3g %s for the file: %s", path, dn, mb < 1e3 ? mb : mb / 1e3,
                    mb < 1e3 ? "MB" : "GB", strerror(e));
        return 1;
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, 0, 1); /* our own temporary file */
    hid_t f = H5Fopen(tmp, H5F_ACC_RDWR, fapl);
    H5Pclose(fapl);
    hid_t ds = f >= 0 ? H5Dopen2(f, dn, H5P_DEFAULT) : -1;
    int rc = ds < 0;
    if (!rc) {
        /* one element written allocates the contiguous storage (no fill) */
        double zero = 0.0;
        hsize_t one[2] = {1, 1}, at[2] = {0, 0};
        hid_t ms = H5Screate_simple(2, one, NULL), fs = H5Dget_space(ds);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, at, NULL, one, NULL);
        rc = H5Dwrite(ds, es == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, &zero) < 0;
        H5Sclose(ms);
        H5Sclose(fs);
        const haddr_t a = rc ? HADDR_UNDEF : H5Dget_offset(ds);
        rc = rc || a == HADDR_UNDEF;
        *offset = rc ? 0 : (int64_t)a;
    }
    if (ds >= 0 && H5Dclose(ds) < 0) rc = 1;
    if (f >= 0 && H5Fclose(f) < 0) rc = 1;
    if (rc) ghf__seterr(err, errlen, "%s:%s: cannot allocate the dataset in %s", path, dn, tmp);
    return rc;
}

/* All ranks, step 3: rows [row0, row0 + nrows) at offset, in pieces.
 * 0, or 1 with a message (this rank's). */
static int write_rows(MPI_Comm comm, const char *tmp, const char *path, const char *dn, int64_t offset, int d,
                      int es, int64_t row0, int64_t nrows, const double *x, char *err, size_t errlen)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    const int64_t row_bytes = (int64_t)d * es;
    int64_t piece_rows = (int64_t)(ghf__h5_max_piece_bytes() / (size_t)row_bytes);
    if (piece_rows < 1) piece_rows = 1;
    if (piece_rows > (int64_t)(INT32_MAX / d)) piece_rows = INT32_MAX / d;
    int64_t my_pieces = (nrows + piece_rows - 1) / piece_rows, n_pieces = 0;
    MPI_Allreduce(&my_pieces, &n_pieces, 1, MPI_INT64_T, MPI_MAX, comm);
    float *fbuf = NULL;
    int bad = 0;
    if (es == 4 && nrows > 0) {
        fbuf = (float *)malloc((size_t)(nrows < piece_rows ? nrows : piece_rows) * (size_t)d * sizeof(float));
        bad = !fbuf;
    }
    MPI_File fh;
    const int orc = MPI_File_open(comm, tmp, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    if (orc != MPI_SUCCESS) {
        free(fbuf);
        ghf__seterr(err, errlen, "%s:%s: cannot open %s with MPI-IO on rank %d", path, dn, tmp, rank);
        return 1;
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    for (int64_t p = 0; p < n_pieces; p++) {
        const int64_t lr0 = p * piece_rows;
        const int64_t cnt = bad || lr0 >= nrows ? 0 : (nrows - lr0 < piece_rows ? nrows - lr0 : piece_rows);
        const void *buf = x ? (const void *)(x + lr0 * d) : (const void *)&bad;
        if (cnt > 0 && es == 4) {
            const double *src = x + lr0 * d;
            const int64_t m = cnt * d;
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < m; i++) fbuf[i] = (float)src[i];
            buf = fbuf;
        }
        MPI_Status ms;
        const MPI_Offset at = (MPI_Offset)(offset + (row0 + lr0) * row_bytes);
        const int rc = MPI_File_write_at_all(fh, at, buf, (int)(cnt * d), es == 4 ? MPI_FLOAT : MPI_DOUBLE, &ms);
        int got = 0;
        MPI_Get_count(&ms, es == 4 ? MPI_FLOAT : MPI_DOUBLE, &got);
        if (rc != MPI_SUCCESS || (cnt > 0 && got != (int)(cnt * d))) bad = 1;
    }
    ghf__h5_set_last_n_pieces((int)n_pieces);
    if (MPI_File_sync(fh) != MPI_SUCCESS) bad = 1;
    if (MPI_File_close(&fh) != MPI_SUCCESS) bad = 1;
    free(fbuf);
    if (bad) ghf__seterr(err, errlen, "%s:%s: writing %s failed on rank %d (disk full or I/O error)", path, dn, tmp,
                         rank);
    return bad;
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
    if (rank == 0) st = ghf__check_writable(path, err, errlen);
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) return st;
    const int es = dtype_bits / 8;
    if (n > (INT64_MAX / 2) / d / es) {
        ghf__seterr(err, errlen, "%s:%s: %" PRId64 " x %d values do not fit in a file", pn, dn, n, d);
        return 2;
    }

    /* --- rank 0: skeleton and reservation --------------------------------------- */
    char *tmp = NULL;
    int64_t offset = 0;
    if (rank == 0) {
        st = make_skeleton(path, dn, n, d, es, n_attrs, attr_keys, attr_vals, &tmp, err, errlen);
        if (st == 0) st = reserve_and_allocate(tmp, path, dn, n * d * es, es, &offset, err, errlen);
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        if (tmp) unlink(tmp);
        free(tmp);
        return st;
    }
    char tname[4200] = "";
    if (rank == 0) snprintf(tname, sizeof tname, "%s", tmp);
    MPI_Bcast(tname, (int)sizeof tname, MPI_CHAR, 0, comm);
    MPI_Bcast(&offset, 1, MPI_INT64_T, 0, comm);

    /* --- all ranks: the rows ------------------------------------------------------ */
    st = write_rows(comm, tname, pn, dn, offset, d, es, row0, nrows, x, err, errlen);
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        if (rank == 0) unlink(tname);
        free(tmp);
        return st;
    }

    /* --- rank 0: rename into place -------------------------------------------------- */
    if (rank == 0) {
        if (rename(tname, path) != 0) {
            ghf__seterr(err, errlen, "%s:%s: cannot rename %s into place: %s", pn, dn, tname, strerror(errno));
            unlink(tname);
            st = 1;
        } else {
            ghf__fsync_parent(path);
        }
    }
    free(tmp);
    return ghf__agree(comm, st, err, errlen);
}
