/* h5read.c - collective row-shard read of an N x d matrix (parallel HDF5).
 *
 * Rank 0 first inspects the file with the serial driver (so that every bad
 * input gets one precise message), broadcasts what it found, then all ranks
 * open the file with the MPI-IO driver and read their block of rows with
 * collective transfers, in the FILE's element type (HDF5 1.10 silently
 * falls back to independent I/O when it has to convert), at most
 * ghf__h5_max_piece_bytes() per rank and call; conversion to double follows
 * in an OpenMP loop. */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, getpid, gmtime_r, mkdtemp */
#endif

/* standard headers */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* this module */
#include "h5internal.h"

void ghf_block_range(int64_t n, int rank, int size, int64_t *row0, int64_t *nrows)
{
    if (n <= 0 || size <= 0 || rank < 0 || rank >= size) {
        if (row0) *row0 = 0;
        if (nrows) *nrows = 0;
        return;
    }
    /* floor(r*n/P) without overflowing r*n: r*q + floor(r*rem/P). */
    int64_t q = n / size, rem = n % size;
    int64_t a = (int64_t)rank * q + ((int64_t)rank * rem) / size;
    int64_t b = (int64_t)(rank + 1) * q + ((int64_t)(rank + 1) * rem) / size;
    if (row0) *row0 = a;
    if (nrows) *nrows = b - a;
}

void ghf_block_range_granular(int64_t n, int64_t g, int rank, int size, int64_t *row0, int64_t *nrows)
{
    if (g <= 1) {
        ghf_block_range(n, rank, size, row0, nrows);
        return;
    }
    int64_t b0 = 0, nb = 0;
    ghf_block_range(n > 0 ? (n - 1) / g + 1 : 0, rank, size, &b0, &nb);
    int64_t a = b0 * g, b = (b0 + nb) * g;
    if (a > n) a = n;
    if (b > n) b = n;
    if (row0) *row0 = a;
    if (nrows) *nrows = b - a;
}

void ghf_shard_free(ghf_shard *s)
{
    if (!s) return;
    free(s->x);
    s->x = NULL;
    free(s->x32);
    s->x32 = NULL;
    s->nrows = 0;
}

/* x from x32; x32 freed unless keep */
static int widen(ghf_shard *s, int keep)
{
    if (!s->x32) return 0;
    const int64_t m = s->nrows * s->d;
    double *x = malloc((size_t)(m > 0 ? m : 1) * sizeof(double));
    if (!x) return 1;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; i++) x[i] = (double)s->x32[i];
    if (!keep) {
        free(s->x32);
        s->x32 = NULL;
    }
    free(s->x);
    s->x = x;
    return 0;
}

int ghf_shard_widen(ghf_shard *s) { return widen(s, 0); }

int ghf_shard_widen_keep(ghf_shard *s) { return widen(s, 1); }

/* A 1-D dataset where a matrix is expected: status 2 (the message of the inspection) */
static int refuse_1d(const char *path, const char *dn, int64_t n, char *err, size_t errlen)
{
    ghf__seterr(err, errlen, "%s:%s: dataset is 1-D (shape %" PRId64 "), expected 2-D (rows x columns)", path, dn, n);
    return 2;
}

static int probe_any(const char *path, const char *dataset, int vector, int64_t *n, int *d, char *file,
                     size_t file_len, char *err, size_t errlen)
{
    ghf__dsinfo *info = (ghf__dsinfo *)malloc(sizeof *info);
    if (!info) {
        ghf__seterr(err, errlen, "%s: out of memory", path ? path : "(null)");
        return 1;
    }
    int rc = ghf__inspect(path, dataset, info, err, errlen);
    if (rc == 0 && info->ndims == 1 && !vector) rc = refuse_1d(path, ghf__dsname(dataset), info->n, err, errlen);
    if (rc == 0 && vector && info->d != 1) {
        ghf__seterr(err, errlen, "%s:%s: a weights dataset must be a vector (n or n x 1), not %" PRId64 " x %" PRId64,
                    path, ghf__dsname(dataset), info->n, info->d);
        rc = 2;
    }
    if (rc == 0) {
        if (n) *n = info->n;
        if (d) *d = (int)info->d;
        if (file && file_len) snprintf(file, file_len, "%s", info->file);
    }
    free(info);
    return rc;
}

int ghf_h5_probe_file(const char *path, const char *dataset, int64_t *n, int *d, char *file, size_t file_len,
                      char *err, size_t errlen)
{
    return probe_any(path, dataset, 0, n, d, file, file_len, err, errlen);
}

int ghf_h5_probe_vector(const char *path, const char *dataset, int64_t *n, char *err, size_t errlen)
{
    return probe_any(path, dataset, 1, n, NULL, NULL, 0, err, errlen);
}

int ghf_h5_probe(const char *path, const char *dataset, int64_t *n, int *d,
                 char *err, size_t errlen)
{
    return ghf_h5_probe_file(path, dataset, n, d, NULL, 0, err, errlen);
}

int ghf_h5_window(const char *what, int64_t n, int64_t start, int64_t len, int64_t *rows, char *err, size_t errlen)
{
    *rows = 0;
    if (start < 0 || start >= n) {
        ghf__seterr(err, errlen, "%s: window start %" PRId64 " is out of range (dataset has %" PRId64 " rows)", what,
                    start, n);
        return 2;
    }
    if (len == 0) {
        ghf__seterr(err, errlen, "%s: window of 0 rows requested (window start %" PRId64 ")", what, start);
        return 2;
    }
    if (len > n - start) {
        ghf__seterr(err, errlen, "%s: window of %" PRId64 " rows from row %" PRId64 " is out of range (dataset has %"
                    PRId64 " rows)", what, len, start, n);
        return 2;
    }
    *rows = len < 0 ? n - start : len;
    return 0;
}

int ghf_fit_shape_check(const char *what, int64_t rows, int64_t d, int n_ranks, char *err, size_t errlen)
{
    if (rows < d + 1) {
        ghf__seterr(err, errlen, "%s: %" PRId64 " rows but %" PRId64 " columns: at least d + 1 = %" PRId64
                    " rows are needed for a fit", what, rows, d, d + 1);
        return 2;
    }
    if (d > GHF_D_MAX) {
        ghf__seterr(err, errlen, "%s: %" PRId64 " columns: ghfit fits at most %d (docs/user-guide.md, \"Limits\")",
                    what, d, GHF_D_MAX);
        return 2;
    }
    const long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || psize <= 0) return 0; /* unknown: let malloc decide */
    const double mem = (double)pages * (double)psize;
    const double per_rank = ceil((double)rows / (n_ranks > 0 ? n_ranks : 1)) * (double)d * 8.0;
    const double dd = 4.0 * (double)d * (double)d * 8.0; /* data and fitted covariances, factors */
    if (per_rank + dd > mem) {
        ghf__seterr(err, errlen, "%s: %" PRId64 " rows x %" PRId64 " columns need at least %.3g GiB per rank "
                    "on %d rank%s (%.3g GiB of rows, %.3g GiB of d x d matrices), more than the %.3g GiB of this "
                    "node: use more ranks or a row window", what, rows, d, (per_rank + dd) / 1073741824.0,
                    n_ranks, n_ranks == 1 ? "" : "s", per_rank / 1073741824.0, dd / 1073741824.0,
                    mem / 1073741824.0);
        return 2;
    }
    return 0;
}

int ghf_rows_mem_check(const char *what, int64_t rows, int64_t d, int n_ranks, double bytes_per_value, char *err,
                       size_t errlen)
{
    if (n_ranks < 1) n_ranks = 1;
    if (d < 1 || rows > INT64_MAX / 16 / d) {
        ghf__seterr(err, errlen, "%s: %" PRId64 " rows x %" PRId64 " columns: too many values", what, rows, d);
        return 2;
    }
    const long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || psize <= 0) return 0; /* unknown: let malloc decide */
    const double mem = (double)pages * (double)psize;
    const double need = ceil((double)rows / n_ranks) * (double)d * bytes_per_value + 3.0 * (double)d * (double)d * 8.0;
    if (need > mem) {
        ghf__seterr(err, errlen, "%s: %" PRId64 " rows x %" PRId64 " columns need %.3g GiB per rank on %d rank%s, "
                    "more than the %.3g GiB of this node (use more ranks or fewer rows)", what, rows, d,
                    need / 1073741824.0, n_ranks, n_ranks == 1 ? "" : "s", mem / 1073741824.0);
        return 2;
    }
    return 0;
}

/* Converts cnt elements of the native type (cls, size) at src to double. */
static void to_double(double *dst, const void *src, int64_t cnt, int cls, int size)
{
#define GHF__CONV(T)                                                        \
    do {                                                                    \
        const T *s_ = (const T *)src;                                       \
        _Pragma("omp parallel for schedule(static)")                        \
        for (int64_t i = 0; i < cnt; i++) dst[i] = (double)s_[i];           \
    } while (0)
    if (cls == 0) {
        if (size == 4) GHF__CONV(float);
        else GHF__CONV(double);
    } else if (cls == 1) {
        switch (size) {
        case 1: GHF__CONV(int8_t); break;
        case 2: GHF__CONV(int16_t); break;
        case 4: GHF__CONV(int32_t); break;
        default: GHF__CONV(int64_t); break;
        }
    } else {
        switch (size) {
        case 1: GHF__CONV(uint8_t); break;
        case 2: GHF__CONV(uint16_t); break;
        case 4: GHF__CONV(uint32_t); break;
        default: GHF__CONV(uint64_t); break;
        }
    }
#undef GHF__CONV
}

/* Row i for --missing em (drop_nonfinite 3): 0 usable (finite or NaN
 * entries, at least one finite), 1 every entry NaN (dropped), 2 an infinite
 * entry (an error) */
static int row_class_missing(const char *x, size_t esz, int64_t i, int d)
{
    int nan = 0, inf = 0;
    for (int j = 0; j < d; j++) {
        const double v = esz == sizeof(float) ? (double)((const float *)x)[i * d + j] : ((const double *)x)[i * d + j];
        nan += isnan(v) ? 1 : 0;
        inf |= isinf(v) ? 1 : 0;
    }
    return inf ? 2 : nan == d ? 1 : 0;
}

/* 1 if every value of row i (elements of esz bytes: float or double) is finite */
static int row_finite(const char *x, size_t esz, int64_t i, int d)
{
    int ok = 1;
    if (esz == sizeof(float)) {
        const float *xi = (const float *)x + i * d;
        for (int j = 0; j < d; j++) ok &= isfinite(xi[j]) ? 1 : 0;
    } else {
        const double *xi = (const double *)x + i * d;
        for (int j = 0; j < d; j++) ok &= isfinite(xi[j]) ? 1 : 0;
    }
    return ok;
}

static void (*g_before_read)(const char *path);
void ghf__h5_set_before_read_hook(void (*fn)(const char *path)) { g_before_read = fn; }

/* What a rank reads: the window, its rows, pieces and element layout. */
typedef struct shard_plan {
    const char *path, *dn;
    ghf__dsinfo info;
    int64_t w0, wn, row0, nrows, piece_rows, n_pieces, row_bytes;
    int d, keep, direct, rank;
    size_t esz;
} shard_plan;

/* Collective open and read of the plan's rows into x (tmp: a piece of file
 * elements to convert, when not direct).  0, or 2 (agreed) with err set;
 * closes what it opened. */
static int read_pieces(MPI_Comm comm, const shard_plan *sp, char *x, void *tmp, char *err, size_t errlen)
{
    const char *path = sp->path, *dn = sp->dn;
    const int d = sp->d, rank = sp->rank, direct = sp->direct, keep = sp->keep, es = sp->info.size;
    const size_t esz = sp->esz;
    const int64_t w0 = sp->w0, row0 = sp->row0, nrows = sp->nrows, piece_rows = sp->piece_rows,
                  n_pieces = sp->n_pieces;
    int st = 0;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_file_locking(fapl, 1, 1);
    /* the file as opened: a read that fails is checked against it */
    struct stat st_open;
    const int have_st = stat(path, &st_open) == 0;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    char why[900] = "";
    const int named = f < 0 && ghf__explain_open_failure(path, dn, why, sizeof why);
    H5Pclose(fapl);
    hid_t ds = -1;
    if (f < 0) {
        if (named)
            ghf__seterr(err, errlen, "%s (rank %d)", why, rank);
        else
            ghf__seterr(err, errlen, "%s:%s: cannot open the file with the MPI-IO driver (rank %d)", path, dn, rank);
        st = 2;
    } else {
        ds = H5Dopen2(f, dn, H5P_DEFAULT);
        if (ds < 0) {
            ghf__seterr(err, errlen, "%s:%s: cannot open the dataset with the MPI-IO driver (rank %d)",
                        path, dn, rank);
            st = 2;
        }
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        if (ds >= 0) H5Dclose(ds);
        if (f >= 0) H5Fclose(f);
        return st;
    }
    if (g_before_read) g_before_read(path);
    hid_t ftype = H5Dget_type(ds);
    hid_t mtype = keep ? H5Tcopy(H5T_NATIVE_FLOAT) : H5Tget_native_type(ftype, H5T_DIR_ASCEND);
    hid_t fspace = H5Dget_space(ds);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    int64_t bad_lo = -1, bad_hi = -1;
    ghf__stack_facts sf = {0, 0, -1, -1};
    double dummy = 0.0;
    for (int64_t p = 0; p < n_pieces; p++) {
        int64_t lr0 = p * piece_rows;
        int64_t cnt = lr0 < nrows ? (nrows - lr0 < piece_rows ? nrows - lr0 : piece_rows) : 0;
        hid_t mspace;
        void *buf;
        if (cnt > 0) {
            hsize_t start[2] = {(hsize_t)(w0 + row0 + lr0), 0};
            hsize_t count[2] = {(hsize_t)cnt, (hsize_t)d};
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL); /* 1-D: start[0], count[0] */
            mspace = H5Screate_simple(2, count, NULL);
            buf = direct ? (void *)(x + (size_t)(lr0 * d) * esz) : tmp;
        } else {
            hsize_t one = 1;
            H5Sselect_none(fspace);
            mspace = H5Screate_simple(1, &one, NULL);
            H5Sselect_none(mspace);
            buf = &dummy;
        }
        herr_t r = H5Dread(ds, mtype, mspace, fspace, dxpl, buf);
        if (r < 0 && bad_lo < 0) sf = ghf__h5_stack_facts(); /* before the next call clears it */
        H5Sclose(mspace);
        ghf__h5_record_io_mode(dxpl);
        if (r < 0) {
            if (bad_lo < 0) bad_lo = w0 + row0 + lr0;
            bad_hi = w0 + row0 + lr0 + cnt;
        } else if (cnt > 0 && !direct) {
            to_double((double *)x + lr0 * d, tmp, cnt * d, sp->info.cls, es);
        }
    }
    ghf__h5_set_last_n_pieces((int)n_pieces);
    H5Pclose(dxpl);
    H5Sclose(fspace);
    H5Tclose(mtype);
    H5Tclose(ftype);
    H5Dclose(ds);
    H5Fclose(f);
    if (bad_lo >= 0) {
        char fallback[1200];
        snprintf(fallback, sizeof fallback, "%s:%s: reading rows [%" PRId64 ", %" PRId64 ") failed (file truncated or corrupt?)",
                 path, dn, bad_lo, bad_hi);
        /* a cause that can be named first: the file changed, a filter, ... */
        ghf__explain_read_failure(path, dn, have_st ? &st_open : NULL, &sf, bad_lo, bad_hi, fallback, err, errlen);
        st = 2;
    }
    return ghf__agree(comm, st, err, errlen);
}

/* The shard's non-finite rows: an error (agreed), or dropped, or kept
 * (o->drop_nonfinite 0, 1, 2); fills sh and takes x.  0 or 2. */
static int finish_nonfinite(MPI_Comm comm, const ghf_read_opts *o, const shard_plan *sp, char *x, ghf_shard *sh,
                            char *err, size_t errlen)
{
    const char *path = sp->path, *dn = sp->dn;
    const int d = sp->d, es = sp->info.size;
    const size_t esz = sp->esz;
    const int64_t w0 = sp->w0, wn = sp->wn, row0 = sp->row0;
    int64_t nrows = sp->nrows;
    int64_t nbad = 0, first = INT64_MAX;
    const int mode3 = o->drop_nonfinite == 3;
    int64_t ninf = 0, first_inf = INT64_MAX;
    for (int64_t i = 0; mode3 && i < nrows; i++)
        if (row_class_missing(x, esz, i, d) == 2) {
            ninf++;
            if (w0 + row0 + i < first_inf) first_inf = w0 + row0 + i;
        }
    if (mode3) { /* --missing em: infinite values are an error, all-NaN rows are dropped */
        int64_t g2[2] = {ninf, 0}, gf = INT64_MAX;
        MPI_Allreduce(g2, g2 + 1, 1, MPI_INT64_T, MPI_SUM, comm);
        MPI_Allreduce(&first_inf, &gf, 1, MPI_INT64_T, MPI_MIN, comm);
        if (g2[1] > 0) {
            free(x);
            ghf__seterr(err, errlen, "%s:%s: %" PRId64 " %s infinite values (first at row %" PRId64 "); with "
                        "--missing em only NaN marks a missing entry", path, dn, g2[1],
                        g2[1] == 1 ? "row contains" : "rows contain", gf);
            return 2;
        }
    }
    const int keep = o->drop_nonfinite == 2; /* kept as they are: nothing to count (the same on every rank) */
#pragma omp parallel for schedule(static) reduction(+ : nbad) reduction(min : first)
    for (int64_t i = 0; i < (keep ? 0 : nrows); i++) {
        const int ok = mode3 ? row_class_missing(x, esz, i, d) == 0 : row_finite(x, esz, i, d);
        if (!ok) {
            nbad++;
            if (w0 + row0 + i < first) first = w0 + row0 + i;
        }
    }
    int64_t loc[1] = {nbad}, glob_bad = 0, glob_first = INT64_MAX;
    if (!keep) {
        MPI_Allreduce(loc, &glob_bad, 1, MPI_INT64_T, MPI_SUM, comm);
        MPI_Allreduce(&first, &glob_first, 1, MPI_INT64_T, MPI_MIN, comm);
    }

    sh->d = d;
    sh->file_dtype_bits = (sp->info.cls == 0) ? 8 * es : (es <= 4 ? 32 : 64);
    if (glob_bad > 0 && !o->drop_nonfinite) {
        free(x);
        ghf__seterr(err, errlen,
                    "%s:%s: %" PRId64 " %s non-finite values (first at row %" PRId64 "); use --drop-nonfinite to skip them",
                    path, dn, glob_bad, glob_bad == 1 ? "row contains" : "rows contain", glob_first);
        return 2; /* same on every rank: derived from reduced values */
    }
    if (glob_bad > 0 && (o->drop_nonfinite == 1 || mode3)) {
        int64_t k = 0;
        const size_t rb = (size_t)d * esz;
        for (int64_t i = 0; i < nrows; i++) {
            if (mode3 ? row_class_missing(x, esz, i, d) == 0 : row_finite(x, esz, i, d)) {
                if (k != i) memmove(x + (size_t)k * rb, x + (size_t)i * rb, rb);
                if (o->companion) o->companion[k] = o->companion[i];
                k++;
            }
        }
        nrows = k;
        if (nrows == 0) {
            free(x);
            x = NULL;
        } else {
            char *nx = (char *)realloc(x, (size_t)nrows * (size_t)d * esz);
            if (nx) x = nx;
        }
        int64_t kept = 0;
        MPI_Allreduce(&nrows, &kept, 1, MPI_INT64_T, MPI_SUM, comm);
        if (kept == 0) {
            free(x);
            if (mode3)
                ghf__seterr(err, errlen, "%s:%s: every one of the %" PRId64 " rows is empty (all NaN)", path, dn, wn);
            else
                ghf__seterr(err, errlen, "%s:%s: all %" PRId64 " rows contain non-finite values", path, dn, wn);
            return 2;
        }
        sh->n_global = kept;
        sh->row0 = -1;
        sh->n_dropped = glob_bad;
    } else {
        sh->n_global = wn;
        sh->row0 = row0;
        sh->n_dropped = 0;
    }
    sh->nrows = nrows;
    if (sp->keep)
        sh->x32 = nrows > 0 ? (float *)x : NULL;
    else
        sh->x = nrows > 0 ? (double *)x : NULL;
    if (nrows == 0) free(x);
    return 0;
}


static int read_shard(MPI_Comm comm, const ghf_read_opts *o, int keep_f32, ghf_shard *out, char *err,
                      size_t errlen)
{
    char lbuf[1024];
    int rank = 0, size = 1;
    err = ghf__h5_begin(comm, err, &errlen, lbuf, sizeof lbuf, &rank, &size);

    ghf_shard sh;
    memset(&sh, 0, sizeof sh);
    if (out) memset(out, 0, sizeof *out);

    const char *path = o ? o->path : NULL;
    const char *dn = ghf__dsname(o ? o->dataset : NULL);
    int st = 0;
    if (!o || !out) {
        ghf__seterr(err, errlen, "internal error: ghf_h5_read_shard called without options or output");
        st = 2;
    } else if (o->win_step != 0 && o->win_step != 1) {
        ghf__seterr(err, errlen, "%s:%s: row step %" PRId64 " is not supported (only 1)",
                    path ? path : "(null)", dn, o->win_step);
        st = 2;
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) return st;

    /* --- rank 0 inspects the file and the window --------------------------- */
    ghf__dsinfo info;
    memset(&info, 0, sizeof info);
    int64_t w0 = o->win_start, wn = 0;
    if (rank == 0) {
        st = ghf__inspect(path, dn, &info, err, errlen);
        if (st == 0 && info.ndims == 1 && !o->vector) st = refuse_1d(path, dn, info.n, err, errlen);
        if (st == 0) {
            char what[1200];
            snprintf(what, sizeof what, "%s:%s", path, dn);
            st = ghf_h5_window(what, info.n, w0, o->win_len, &wn, err, errlen);
        }
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) return st;
    int64_t meta[6] = {info.n, info.d, info.cls, info.size, info.chunked, wn};
    MPI_Bcast(meta, 6, MPI_INT64_T, 0, comm);
    info.n = meta[0];
    info.d = meta[1];
    info.cls = (int)meta[2];
    info.size = (int)meta[3];
    info.chunked = (int)meta[4];
    wn = meta[5];
    const int d = (int)info.d;
    const int es = info.size;
    /* float32 kept as it is, or everything widened to double */
    const int keep = keep_f32 && info.cls == 0 && es == 4;
    const size_t esz = keep ? sizeof(float) : sizeof(double);
    const int direct = (info.cls == 0 && es == 8) || keep;

    /* --- partition, pieces, buffers ------------------------------------------ */
    int64_t row0 = 0, nrows = 0;
    ghf_block_range_granular(wn, o->granule, rank, size, &row0, &nrows);
    size_t piece_bytes = ghf__h5_max_piece_bytes();
    int64_t row_bytes = (int64_t)d * es;
    int64_t piece_rows = (int64_t)(piece_bytes / (size_t)row_bytes);
    if (piece_rows < 1) piece_rows = 1;
    int64_t my_pieces = (nrows + piece_rows - 1) / piece_rows, n_pieces = 0;
    MPI_Allreduce(&my_pieces, &n_pieces, 1, MPI_INT64_T, MPI_MAX, comm);

    char *x = NULL; /* nrows*d elements of esz bytes */
    void *tmp = NULL;
    if (nrows > 0) {
        if ((uint64_t)nrows > (uint64_t)(SIZE_MAX / esz / (size_t)d)) {
            st = 1;
        } else {
            x = (char *)malloc((size_t)nrows * (size_t)d * esz);
            if (!x) st = 1;
            if (!direct && x) {
                int64_t tr = nrows < piece_rows ? nrows : piece_rows;
                tmp = malloc((size_t)tr * (size_t)row_bytes);
                if (!tmp) st = 1;
            }
        }
        if (st)
            ghf__seterr(err, errlen, "%s:%s: out of memory for %" PRId64 " rows x %d columns on rank %d",
                        path, dn, nrows, d, rank);
    }
    if ((st = ghf__agree(comm, st, err, errlen)) != 0) {
        free(x);
        free(tmp);
        return st;
    }

    const shard_plan sp = {path, dn, info, w0, wn, row0, nrows, piece_rows, n_pieces, row_bytes, d, keep, direct,
                           rank, esz};
    if ((st = read_pieces(comm, &sp, x, tmp, err, errlen)) != 0) {
        free(x);
        free(tmp);
        return st;
    }
    free(tmp);
    if ((st = finish_nonfinite(comm, o, &sp, x, &sh, err, errlen)) != 0) return st;
    *out = sh;
    return 0;
}

int ghf_h5_read_shard(MPI_Comm comm, const ghf_read_opts *o, ghf_shard *out, char *err, size_t errlen)
{
    return read_shard(comm, o, 0, out, err, errlen);
}

int ghf_h5_read_shard_f32(MPI_Comm comm, const ghf_read_opts *o, ghf_shard *out, char *err, size_t errlen)
{
    return read_shard(comm, o, 1, out, err, errlen);
}
