/* h5sample.c - a sample of an input dataset's rows for `ghfit check`: one
 * process, serial driver, metadata and a few hundred rows only (h5io.h). */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

/* standard headers */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* this module */
#include "h5internal.h"

#define SAMPLE_BLOCKS 64
#define SAMPLE_BLOCK_ROWS 8
/* chunked data: fewer, longer blocks (each block costs a chunk, decompressed whole) */
#define SAMPLE_BLOCKS_CHUNKED 16
#define SAMPLE_BLOCK_ROWS_CHUNKED 32

static void describe(const ghf__dsinfo *info, ghf_h5_sample *s)
{
    s->n_rows = info->n;
    s->d = (int)info->d;
    snprintf(s->type, sizeof s->type, "%s%d", info->cls == 0 ? "float" : info->cls == 1 ? "int" : "uint",
             8 * info->size);
    s->elem_size = info->size;
    snprintf(s->layout, sizeof s->layout, "%s", info->chunked ? "chunked" : "contiguous");
}

/* The rows to read: every row of the window, or blocks spread over it. */
static void plan(ghf_h5_sample *s)
{
    const int64_t d = s->d > 0 ? s->d : 1;
    if (s->len <= GHF_SAMPLE_ALL_ROWS && s->len * d <= GHF_SAMPLE_MAX_VALUES) {
        s->all = 1;
        s->n_blocks = 1;
        s->block_rows = (int)s->len;
        return;
    }
    const int chunked = !strcmp(s->layout, "chunked");
    int64_t br = chunked ? SAMPLE_BLOCK_ROWS_CHUNKED : SAMPLE_BLOCK_ROWS;
    int64_t nb = chunked ? SAMPLE_BLOCKS_CHUNKED : SAMPLE_BLOCKS;
    while (nb > 1 && nb * br * d > GHF_SAMPLE_MAX_VALUES) nb /= 2;
    if (nb * br * d > GHF_SAMPLE_MAX_VALUES) br = 1;
    if (nb * br > s->len) nb = s->len / br;
    s->n_blocks = (int)(nb > 0 ? nb : 1);
    s->block_rows = (int)br;
}

/* The first row of block b (of n) in the window: the first block at the
 * window's start, the last one ending at its end. */
static int64_t block_start(const ghf_h5_sample *s, int b)
{
    if (s->n_blocks <= 1) return s->start;
    const int64_t span = s->len - s->block_rows;
    return s->start + (int64_t)((double)b * (double)span / (double)(s->n_blocks - 1));
}

/* Non-finite rows and constant columns of the rows read. */
static void scan(const double *x, ghf_h5_sample *s)
{
    const int d = s->d;
    s->n_bad = 0;
    s->first_bad = -1;
    s->const_col = -1;
    const double *ref = NULL;
    int64_t n_ok = 0;
    unsigned char *varies = calloc((size_t)d, 1);
    for (int64_t i = 0; i < s->n_read; i++) {
        const double *xi = x + i * d;
        int ok = 1;
        for (int j = 0; j < d; j++) ok &= isfinite(xi[j]) ? 1 : 0;
        if (!ok) {
            const int64_t row = block_start(s, (int)(i / s->block_rows)) + i % s->block_rows;
            if (s->first_bad < 0 || row < s->first_bad) s->first_bad = row;
            s->n_bad++;
            continue;
        }
        n_ok++;
        if (!ref) {
            ref = xi;
            continue;
        }
        if (varies)
            for (int j = 0; j < d; j++) varies[j] |= xi[j] != ref[j];
    }
    if (varies && n_ok >= 2)
        for (int j = 0; j < d && s->const_col < 0; j++)
            if (!varies[j]) s->const_col = j;
    free(varies);
}

int ghf_h5_sample_rows(const char *path, const char *dataset, int64_t start, int64_t len, ghf_h5_sample *s,
                       char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->first_bad = -1;
    s->const_col = -1;
    const char *dn = ghf__dsname(dataset);
    ghf__dsinfo *info = (ghf__dsinfo *)malloc(sizeof *info);
    if (!info) {
        ghf__seterr(err, errlen, "%s: out of memory", path ? path : "(null)");
        return 1;
    }
    int rc = ghf__inspect(path, dn, info, err, errlen);
    if (!rc) describe(info, s);
    free(info);
    if (rc) return rc;
    char what[1200];
    snprintf(what, sizeof what, "%s:%s", path, dn);
    if ((rc = ghf_h5_window(what, s->n_rows, start, len, &s->len, err, errlen)) != 0) return rc;
    s->start = start;
    plan(s);
    s->n_read = (int64_t)s->n_blocks * s->block_rows;
    double *x = (double *)malloc((size_t)s->n_read * (size_t)s->d * sizeof(double));
    if (!x) {
        ghf__seterr(err, errlen, "%s: out of memory for a sample of %" PRId64 " rows", what, s->n_read);
        return 1;
    }
    ghf__h5_quiet();
    struct stat st_open;
    const int have_st = stat(path, &st_open) == 0;
    ghf__stack_facts sf = {0, 0, -1, -1};
    hid_t f = ghf__h5_open_ro(path);
    hid_t ds = f >= 0 ? H5Dopen2(f, dn, H5P_DEFAULT) : -1;
    hid_t fs = ds >= 0 ? H5Dget_space(ds) : -1, ms = -1;
    rc = fs < 0 || H5Sselect_none(fs) < 0;
    for (int b = 0; !rc && b < s->n_blocks; b++) {
        const hsize_t off[2] = {(hsize_t)block_start(s, b), 0}, cnt[2] = {(hsize_t)s->block_rows, (hsize_t)s->d};
        rc = H5Sselect_hyperslab(fs, H5S_SELECT_OR, off, NULL, cnt, NULL) < 0;
    }
    if (!rc) {
        const hsize_t mdims[2] = {(hsize_t)s->n_read, (hsize_t)s->d};
        ms = H5Screate_simple(2, mdims, NULL);
        rc = ms < 0 || H5Dread(ds, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, x) < 0;
        if (rc) sf = ghf__h5_stack_facts(); /* before the next call clears it */
    }
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (ds >= 0) H5Dclose(ds);
    if (f >= 0) H5Fclose(f);
    if (rc) {
        char fallback[1400];
        snprintf(fallback, sizeof fallback, "%s: reading a sample of %" PRId64 " rows failed (file truncated or corrupt?)",
                 what, s->n_read);
        /* a cause that can be named first: the file changed, a filter, ... */
        ghf__explain_read_failure(path, dn, have_st ? &st_open : NULL, &sf, s->start, s->start + s->len, fallback,
                                  err, errlen);
        free(x);
        return 2;
    }
    scan(x, s);
    free(x);
    return 0;
}
