/* record.h - owned copies of fit records (ghf_fit_record only points into
 * memory) and their serialisation, for the messages of `ghfit run` and the
 * checkpoint log. */
#ifndef GHF_RECORD_H
#define GHF_RECORD_H

#include <stdint.h>

#include "h5io.h"
#include "pack.h"

/* ---- owned fit records ---- */

typedef struct ghf_rec {
    int64_t index;      /* the fit's index in the job */
    ghf_fit_record r;   /* every pointer points into this struct's own allocations */
    char *name, *family, *status, *backend, *moments_note, *data_file, *dataset, *device, *weights, *missing;
    double *trace, *mu, *gamma, *sigma, *mean, *cov, *phase_s, *missing_counts, *fB, *fD;
    ghf_fit_se se;      /* r.se points here when the record has standard errors */
    char *se_str[3];    /* method, reason, names */
    double *se_arr[6];  /* mu, gamma, sigma, mean, cov, param_cov */
    double *mx_arr[7];  /* a mixture: prop, mu, gamma, sigma, pab, mean, cov */
    double *mx_starts[3]; /* start loglik, n_iter, converged (as read) */
    int *mx_si, *mx_sc;
    char **mx_notes;    /* [K] */
} ghf_rec;

void ghf_rec_pack(ghf_pack *b, int64_t index, const ghf_fit_record *r);
/* 0, or -1 if the bytes are not a record */
int  ghf_rec_unpack(ghf_unpack *u, ghf_rec *rec);
void ghf_rec_free(ghf_rec *rec);

#endif
