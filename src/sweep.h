/* sweep.h - what `ghfit run` moves between ranks and into checkpoints:
 * a byte buffer for serialising, owned copies of fit records (ghf_fit_record
 * only points into memory), and the summary table printer shared by
 * `ghfit run` and `ghfit summary`. */
#ifndef GHF_SWEEP_H
#define GHF_SWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "h5io.h"

/* ---- serialisation (native byte order: the ranks of one job share it) ---- */

typedef struct ghf_pack {
    unsigned char *p;
    size_t n, cap;
    int oom;
} ghf_pack;

void ghf_pack_bytes(ghf_pack *b, const void *x, size_t n);
void ghf_pack_i64(ghf_pack *b, int64_t v);
void ghf_pack_f64(ghf_pack *b, double v);
void ghf_pack_str(ghf_pack *b, const char *s);             /* NULL packs as absent */
void ghf_pack_f64s(ghf_pack *b, const double *x, int64_t n); /* count + values; NULL = absent */
void ghf_pack_free(ghf_pack *b);

typedef struct ghf_unpack {
    const unsigned char *p;
    size_t n, off;
    int bad;
} ghf_unpack;

int64_t ghf_unpack_i64(ghf_unpack *u);
double  ghf_unpack_f64(ghf_unpack *u);
char   *ghf_unpack_str(ghf_unpack *u);                  /* malloc'd or NULL */
double *ghf_unpack_f64s(ghf_unpack *u, int64_t *n);     /* malloc'd or NULL */

/* ---- owned fit records ---- */

typedef struct ghf_rec {
    int64_t index;      /* the fit's index in the job */
    ghf_fit_record r;   /* every pointer points into this struct's own allocations */
    char *name, *family, *status, *backend, *moments_note;
    double *trace, *mu, *gamma, *sigma, *mean, *cov, *phase_s;
} ghf_rec;

void ghf_rec_pack(ghf_pack *b, int64_t index, const ghf_fit_record *r);
/* 0, or -1 if the bytes are not a record */
int  ghf_rec_unpack(ghf_unpack *u, ghf_rec *rec);
void ghf_rec_free(ghf_rec *rec);

/* ---- the summary table ---- */

typedef enum { GHF_SORT_NONE, GHF_SORT_AIC, GHF_SORT_BIC, GHF_SORT_LOGLIK, GHF_SORT_NAME } ghf_sort_key;
int ghf_sort_key_parse(const char *s, ghf_sort_key *k);

typedef struct ghf_summary_row {
    ghf_fit_summary s;
    const char *file; /* NULL: no file column */
} ghf_summary_row;

/* Sort rows by key (aic/bic ascending, loglik descending, name ascending; ties by
 * file then name) and print a table with a delta column for aic/bic/loglik. */
void ghf_summary_print(FILE *f, ghf_summary_row *rows, int n, ghf_sort_key key);

#endif
