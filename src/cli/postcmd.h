/* postcmd.h - the commands that use a fit (eval, sample, gof, risk): their
 * options, parsed by one function each that both the command and `ghfit
 * check` call, and the pieces of their pre-start checks that check shares. */
#ifndef GHF_POSTCMD_H
#define GHF_POSTCMD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "h5io.h"
#include "iocheck.h"
#include "model.h"
#include "risk.h"
#include "score.h"

/* Every parser: argv[0] is the command; the defaults are set first.
 * Returns 0, -1 for --help (nothing printed), or GHF_EXIT_USAGE after
 * printing one error line. */

typedef struct ghf_eval_args {
    const char *model; /* R.h5[:/fits/NAME] */
    int quiet;
    ghf_eval_opts o;   /* data, dataset, out, backend (model_file, fit_name: from model) */
} ghf_eval_args;
int ghf_eval_parse(int argc, char **argv, ghf_eval_args *a);

/* sample's memory per drawn value on a rank: the float64 rows and a float32
 * piece of the write (ghf_rows_mem_check) */
#define GHF_SAMPLE_BYTES_PER_VALUE 12.0
typedef struct ghf_sample_opts {
    const char *model, *out, *dataset;
    int64_t n, seed;
    int bits, quiet;
} ghf_sample_opts;
int ghf_sample_parse(int argc, char **argv, ghf_sample_opts *so);
/* The io plan of `ghfit sample` (file: the result file of --model). */
ghf_io_plan ghf_sample_plan(const ghf_sample_opts *so, const char *file, int n_ranks);
/* The law's parameters into t (allocated for law->d) and the Cholesky
 * factor of Sigma into L [d*d]: 0, or 2 with sample's message. */
int ghf_sample_law(const ghf_fit_law *law, const char *file, ghf_params *t, double *L, char *err, size_t errlen);
/* A mixture law (law->n_components K >= 2) into m (allocated for K, d) and
 * the K Cholesky factors into L [K][d*d]: 0, or 2 with a message naming the
 * component whose Sigma is not positive definite. */
int ghf_sample_mix_law(const ghf_fit_law *law, const char *file, ghf_mixture *m, double *L, char *err,
                       size_t errlen);

typedef struct ghf_gof_opts {
    const char *model, *data, *dataset, *out;
    int Q, drop, quiet;
    int64_t nexact, nknots;
    int B;          /* --bootstrap (0: none) */
    int64_t seed;   /* --seed */
    double tol;     /* --tol: the refits' EM tolerance */
    int max_iter;   /* --max-iter */
} ghf_gof_opts;
int ghf_gof_parse(int argc, char **argv, ghf_gof_opts *o);
/* The io plan of `ghfit gof` (file: the result file of --model). */
ghf_io_plan ghf_gof_plan(const ghf_gof_opts *o, const char *file, int n_ranks);
/* gof sorts each column of n rows across `ranks` ranks: 0, or 2 with gof's
 * message when a rank's share (n / ranks) is 2^31 values or more (MPI
 * counts; an uneven sort can still refuse a little below, at run time), or
 * when n passes GHF_GOF_MAX_N = 2^35 (src/law/gof.h: the exact sums). */
int ghf_gof_rows_check(int64_t n, int ranks, char *err, size_t errlen);
/* gof of a mixture checks its margins (through the mixture cdf; no radial
 * statistic) and has no bootstrap (its replicates refit one law): 0, or 2
 * with gof's message for a mixture with bootstrap > 0. */
int ghf_gof_law_check(const ghf_fit_law *law, const char *file, int bootstrap, char *err, size_t errlen);
/* n finite rows: 0, or 2 with gof's message when fewer than 2. */
int ghf_gof_min_rows(const ghf_gof_opts *o, int64_t n, char *err, size_t errlen);

typedef struct ghf_risk_opts {
    char model[4096], fit[256], wfile[4096], wdset[1024];
    const char *out;
    int has_fit, K;
    double alpha[GHF_RISK_MAX_ALPHA];
} ghf_risk_opts;
/* what rank 0 learns and every rank needs */
typedef struct ghf_risk_model {
    char family[16];
    int d, gauss;
    int64_t P;
    double p, a, b;
    double *mu, *gamma, *sigma;
    int nf;          /* the factor form: R (0: diag) with B [d*R] and D [d] in one block at B; -1: full */
    double *B, *D;
    /* a mixture (n_components Kc >= 2; mu, gamma, sigma NULL): prop [Kc] and
     * the components packed in cp [Kc][2d + d*d + 3] (mu, gamma, sigma, p, a, b) */
    int n_components;
    double *prop, *cp;
} ghf_risk_model;
int ghf_risk_parse(int argc, char **argv, ghf_risk_opts *o);
/* Rank 0 (serial): the inputs (which fit, its law, the weights' shape),
 * then the output (checks, lock; dry = 1: `ghfit check`, creating nothing
 * and taking no lock).  0 or an exit status with one message in err; free
 * md->mu, gamma, sigma in every case. */
int ghf_risk_check(ghf_risk_opts *o, ghf_risk_model *md, int dry, char *err, size_t errlen);
/* The message of a read of the weights that found non-finite values (the
 * reader's, which suggests --drop-nonfinite): risk's own, in place. */
void ghf_risk_nonfinite_msg(char *err, size_t errlen);

/* `ghfit check optimize ARGS` (cmd_optimize.c): its parser and every check of
 * its rank 0 before it optimises (a --bounds dataset: its shape only), in
 * one process without MPI, creating nothing.  0 with what it would do in ok,
 * -1 for --help, or an exit status with one message in err (empty when the
 * parser printed it). */
int ghf_optimize_check(int argc, char **argv, char *ok, size_t oklen, char *err, size_t errlen);

/* `ghfit check eval|sample|gof|risk ARGS` (cmd_check.c dispatches):
 * argv[0] is the command.  The exit status. */
int ghf__check_post(int argc, char **argv, int n_ranks, double t0);

/* Shared by the check of fit|run and of these commands (cmd_check.c). */
void ghf__check_line(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The sample's non-finite rows as the reader would refuse them (drop 0:
 * any; drop 1: all the rows of a fully read window): 2 with the message
 * (the reader's own when every row was read), else 0. */
int ghf__check_nonfinite(const char *file, const char *dataset, const ghf_h5_sample *s, int drop, char *err,
                         size_t errlen);
/* The sample line of the report; bad_note follows the count of non-finite rows. */
void ghf__check_sample_line(const ghf_h5_sample *s, const char *bad_note);
/* The output line of the report (after the output checks passed). */
void ghf__check_output_line(const char *out);
/* check's usage text */
void ghf__check_usage(FILE *f);

#endif
