/* h5gen.c - collective write of an N x d matrix (`ghfit generate`).
 *
 * All ranks create "<path>.tmp.<jobid>" with the MPI-IO driver, write their
 * rows collectively (float32 data converted by us, so that HDF5 does not
 * fall back to independent I/O), close, and rank 0 renames the file into
 * place after a barrier.  On failure the temporary file is removed. */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, getpid, gmtime_r, mkdtemp */
#endif

/* standard headers */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* this module */
#include "h5internal.h"

/* "<path>.tmp.<jobid>": SLURM_JOB_ID when set, else rank 0's pid. */
static char *tmp_name(MPI_Comm comm, const char *path)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    char id[64] = "";
    if (rank == 0) {
        const char *j = getenv("SLURM_JOB_ID");
        if (j && *j && strlen(j) < 40 && !strchr(j, '/'))
            snprintf(id, sizeof id, "%s.%ld", j, (long)getpid());
        else
            snprintf(id, sizeof id, "%ld", (long)getpid());
    }
    MPI_Bcast(id, (int)sizeof id, MPI_CHAR, 0, comm);
    size_t n = strlen(path) + strlen(id) + 8;
    char *t = (char *)malloc(n);
    if (t) snprintf(t, n, "%s.tmp.%s", path, id);
    return t;
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

    char *tmp = tmp_name(comm, path);
    st = tmp ? 0 : 1;
    if (!tmp) ghf__seterr(err, errlen, "%s:%s: out of memory", pn, dn);
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        free(tmp);
        return st;
    }

    /* --- pieces and conversion buffer --------------------------------------- */
    const int es = dtype_bits / 8;
    int64_t row_bytes = (int64_t)d * es;
    int64_t piece_rows = (int64_t)(ghf__h5_max_piece_bytes() / (size_t)row_bytes);
    if (piece_rows < 1) piece_rows = 1;
    int64_t my_pieces = (nrows + piece_rows - 1) / piece_rows, n_pieces = 0;
    MPI_Allreduce(&my_pieces, &n_pieces, 1, MPI_INT64_T, MPI_MAX, comm);
    float *fbuf = NULL;
    if (es == 4 && nrows > 0) {
        int64_t tr = nrows < piece_rows ? nrows : piece_rows;
        fbuf = (float *)malloc((size_t)tr * (size_t)d * sizeof(float));
        if (!fbuf) {
            ghf__seterr(err, errlen, "%s:%s: out of memory on rank %d", pn, dn, rank);
            st = 1;
        }
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        free(fbuf);
        free(tmp);
        return st;
    }

    /* --- collective create --------------------------------------------------- */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_coll_metadata_write(fapl, 1);
    H5Pset_file_locking(fapl, 1, 1);
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot create %s", pn, dn, tmp);
        st = 1;
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        if (f >= 0) H5Fclose(f);
        if (rank == 0) unlink(tmp);
        free(fbuf);
        free(tmp);
        return st;
    }

    hsize_t dims[2] = {(hsize_t)n, (hsize_t)d};
    hid_t fspace = H5Screate_simple(2, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t ftype = es == 4 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
    hid_t mtype = es == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    hid_t ds = H5Dcreate2(f, dn, ftype, fspace, lcpl, dcpl, H5P_DEFAULT);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    if (ds < 0) {
        ghf__seterr(err, errlen, "%s:%s: cannot create the dataset (invalid name?)", pn, dn);
        st = 2;
    }
    for (int i = 0; st == 0 && i < n_attrs; i++) {
        if (ghf__attr_str(ds, attr_keys[i], attr_vals[i]) < 0) {
            ghf__seterr(err, errlen, "%s:%s: cannot write attribute '%s' (duplicate name?)", pn, dn, attr_keys[i]);
            st = 2;
        }
    }
    if (st == 0) {
        if (ghf__attr_str(ds, "description", "data matrix: rows are observations, columns are dimensions") < 0 &&
            H5Aexists(ds, "description") <= 0) {
            ghf__seterr(err, errlen, "%s:%s: cannot write attribute 'description'", pn, dn);
            st = 1;
        }
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        if (ds >= 0) H5Dclose(ds);
        H5Sclose(fspace);
        H5Fclose(f);
        if (rank == 0) unlink(tmp);
        free(fbuf);
        free(tmp);
        return st;
    }

    /* --- collective write, in pieces ---------------------------------------- */
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    int bad = 0;
    float fdummy = 0.0f;
    double ddummy = 0.0;
    for (int64_t p = 0; p < n_pieces; p++) {
        int64_t lr0 = p * piece_rows;
        int64_t cnt = lr0 < nrows ? (nrows - lr0 < piece_rows ? nrows - lr0 : piece_rows) : 0;
        hid_t mspace;
        const void *buf;
        if (cnt > 0) {
            hsize_t start[2] = {(hsize_t)(row0 + lr0), 0};
            hsize_t count[2] = {(hsize_t)cnt, (hsize_t)d};
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
            mspace = H5Screate_simple(2, count, NULL);
            if (es == 4) {
                const double *src = x + lr0 * d;
                int64_t m = cnt * d;
#pragma omp parallel for schedule(static)
                for (int64_t i = 0; i < m; i++) fbuf[i] = (float)src[i];
                buf = fbuf;
            } else {
                buf = x + lr0 * d;
            }
        } else {
            hsize_t one = 1;
            H5Sselect_none(fspace);
            mspace = H5Screate_simple(1, &one, NULL);
            H5Sselect_none(mspace);
            buf = es == 4 ? (const void *)&fdummy : (const void *)&ddummy;
        }
        if (H5Dwrite(ds, mtype, mspace, fspace, dxpl, buf) < 0) bad = 1;
        ghf__h5_record_io_mode(dxpl);
        H5Sclose(mspace);
    }
    ghf__h5_set_last_n_pieces((int)n_pieces);
    H5Pclose(dxpl);
    H5Sclose(fspace);
    if (H5Dclose(ds) < 0) bad = 1;
    if (H5Fclose(f) < 0) bad = 1;
    free(fbuf);
    if (bad) {
        ghf__seterr(err, errlen, "%s:%s: writing %s failed on rank %d (disk full?)", pn, dn, tmp, rank);
        st = 1;
    }
    MPI_Barrier(comm);
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        if (rank == 0) unlink(tmp);
        free(tmp);
        return st;
    }

    /* --- rank 0: fsync and rename into place ---------------------------------- */
    if (rank == 0) {
        ghf__fsync_path(tmp);
        if (rename(tmp, path) != 0) {
            ghf__seterr(err, errlen, "%s:%s: cannot rename %s into place", pn, dn, tmp);
            unlink(tmp);
            st = 1;
        } else {
            ghf__fsync_parent(path);
        }
    }
    free(tmp);
    return ghf__agree(comm, st, err, errlen);
}
