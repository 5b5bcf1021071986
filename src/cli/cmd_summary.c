/* cmd_summary.c - `ghfit summary RESULT.h5...`: the /summary tables of
 * result files as one sorted table, and a warning for every job whose files
 * are an incomplete set of its slices. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "commands.h"
#include "h5io.h"
#include "lrt.h"
#include "summary.h"
#include "util.h"

/* One line per job whose files are an incomplete set of its slices (the
 * files' root attributes slice, job_hash, n_fits_total; files of versions
 * without them are left out). */
static void warn_missing_slices(char **files, const ghf_run_ident *id, int n, const int *n_rows)
{
    for (int i = 0; i < n; i++) {
        if (!id[i].have || id[i].slice_n < 2) continue;
        int first = 1;
        for (int k = 0; k < i && first; k++)
            first = !(id[k].have && id[k].slice_n == id[i].slice_n && !strcmp(id[k].job_hash, id[i].job_hash));
        if (!first) continue;
        const int N = id[i].slice_n;
        unsigned char *seen = calloc((size_t)N, 1);
        if (!seen) return;
        char given[600] = "", missing[400] = "";
        int n_seen = 0, rows = 0;
        for (int k = i; k < n; k++)
            if (id[k].have && id[k].slice_n == N && !strcmp(id[k].job_hash, id[i].job_hash)) {
                if (!seen[id[k].slice_k]) n_seen++;
                seen[id[k].slice_k] = 1;
                rows += n_rows[k];
                const size_t l = strlen(given);
                snprintf(given + l, sizeof given - l, "%s%s (%d/%d)", l ? ", " : "", files[k], id[k].slice_k, N);
            }
        int n_missing = 0;
        for (int q = 0; q < N; q++)
            if (!seen[q]) {
                const size_t l = strlen(missing);
                if (n_missing++ < 20) snprintf(missing + l, sizeof missing - l, "%s%d/%d", l ? ", " : "", q, N);
            }
        if (n_missing > 20) {
            const size_t l = strlen(missing);
            snprintf(missing + l, sizeof missing - l, ", ... (%d in all)", n_missing);
        }
        free(seen);
        if (n_seen < N)
            ghf_warning0("the files of job %s hold %d of its %d slices: slice%s %s missing (the table has %d of the "
                         "job's %lld fits; given: %s)", id[i].job_hash, n_seen, N, n_missing == 1 ? "" : "s", missing,
                         rows, (long long)id[i].n_fits_total, given);
    }
}

/* the LR tests among the rows (their files' model attributes read here) */
static int print_lrt(const ghf_summary_row *all, int n, char *err, size_t errlen)
{
    ghf_fit_model_info *info = calloc((size_t)(n > 0 ? n : 1), sizeof *info);
    ghf_lrt_fit *fits = calloc((size_t)(n > 0 ? n : 1), sizeof *fits);
    ghf_fit_summary *rows = calloc((size_t)(n > 0 ? n : 1), sizeof *rows);
    int st = !info || !fits || !rows ? GHF_EXIT_RUNTIME : 0;
    if (st) snprintf(err, errlen, "out of memory");
    for (int i = 0; i < n; i++) rows[i] = all[i].s;
    /* runs of rows from one file: one open per file */
    for (int i = 0; !st && i < n;) {
        int k = i;
        while (k < n && all[k].file == all[i].file) k++;
        st = ghf_h5_read_fit_models(all[i].file, rows + i, k - i, info + i, err, errlen);
        i = k;
    }
    for (int i = 0; !st && i < n; i++) fits[i] = (ghf_lrt_fit){&rows[i], &info[i], all[i].file};
    if (!st && ghf_lrt_print(stdout, fits, n) == 0)
        printf("\nlikelihood-ratio tests: no nested pair of models fitted to the same data\n");
    free(info);
    free(fits);
    free(rows);
    return st;
}

int ghf_cmd_summary(int argc, char **argv)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ghf_sort_key key = GHF_SORT_AIC;
    int lrt = 0;
    static const struct option opts[] = {{"sort", required_argument, 0, 's'}, {"lrt", no_argument, 0, 'l'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'h') {
            if (rank == 0)
                printf("usage: ghfit summary RESULT.h5... [--sort aic|bic|icl|loglik|name] [--lrt]\n"
                       "  prints the /summary tables of the result files as one table, sorted by the\n"
                       "  chosen column (default aic; loglik sorts the largest first), with the difference\n"
                       "  to the best fit (dAIC, dBIC, dICL, dloglik).  When the files of one job are an incomplete\n"
                       "  set of its slices (job arrays, ghfit run --slice K/N), one 'ghfit: warning:' line on\n"
                       "  stderr names the missing ones (exit status 0)\n"
                       "  --lrt  adds likelihood-ratio tests between the nested models fitted to the same\n"
                       "         data: symmetric vs asymmetric (d df), a fixed p (nig, hyp, --p-fixed) vs gh\n"
                       "         (1 df), vg and t vs gh (a boundary: 0.5 chi2(0) + 0.5 chi2(1)); failed and\n"
                       "         weighted fits are not tested; nor are mixtures (n_components K >= 2): the LR\n"
                       "         between different K has no chi-square law (compare K by BIC or ICL)\n"
                       "  a mixture fit (ghfit fit --components K) adds the columns K and icl (a single law:\n"
                       "  K = 1, ICL = BIC)\n");
            return GHF_EXIT_OK;
        }
        if (c == 'l') {
            lrt = 1;
            continue;
        }
        if (c == 's') {
            if (ghf_sort_key_parse(optarg, &key) != 0) {
                ghf_error0("--sort: '%s' is not aic, bic, icl, loglik or name", optarg);
                return GHF_EXIT_USAGE;
            }
            continue;
        }
        ghf_error0("summary: unknown or incomplete option '%s' (see ghfit summary --help)", argv[optind - 1]);
        return GHF_EXIT_USAGE;
    }
    if (optind >= argc) {
        ghf_error0("summary: no result files given (usage: ghfit summary RESULT.h5... [--sort aic|bic|icl|loglik|name])");
        return GHF_EXIT_USAGE;
    }
    /* serial work on rank 0; the others wait for the status */
    int st = 0;
    char err[1024] = "";
    if (rank == 0) {
        ghf_summary_row *all = NULL;
        int n_all = 0;
        const int n_files = argc - optind;
        ghf_run_ident *ids = calloc((size_t)n_files, sizeof *ids);
        int *n_rows = calloc((size_t)n_files, sizeof *n_rows);
        if (!ids || !n_rows) {
            st = GHF_EXIT_RUNTIME;
            snprintf(err, sizeof err, "out of memory");
        }
        for (int i = optind; i < argc && !st; i++) {
            ghf_fit_summary *rows = NULL;
            int n = 0;
            st = ghf_h5_read_fit_summary(argv[i], &rows, &n, err, sizeof err);
            if (!st) st = ghf_h5_read_run_ident(argv[i], &ids[i - optind], err, sizeof err);
            if (st) {
                free(rows);
                break;
            }
            n_rows[i - optind] = n;
            /* a mixture's K and ICL: attributes of its group (/summary is the same for every K) */
            int *ncomp = malloc((size_t)(n > 0 ? n : 1) * sizeof *ncomp);
            double *icl = malloc((size_t)(n > 0 ? n : 1) * sizeof *icl);
            if (!ncomp || !icl || ghf_h5_read_fit_ncomp(argv[i], rows, n, ncomp, icl, err, sizeof err) != 0) {
                if (!ncomp || !icl) snprintf(err, sizeof err, "out of memory");
                st = ncomp && icl ? GHF_EXIT_USAGE : GHF_EXIT_RUNTIME;
                free(ncomp);
                free(icl);
                free(rows);
                break;
            }
            ghf_summary_row *na = realloc(all, (size_t)(n_all + n + 1) * sizeof *all);
            if (!na) {
                free(ncomp);
                free(icl);
                free(rows);
                st = GHF_EXIT_RUNTIME;
                snprintf(err, sizeof err, "out of memory");
                break;
            }
            all = na;
            for (int k = 0; k < n; k++) {
                all[n_all].s = rows[k];
                all[n_all].file = argv[i];
                all[n_all].n_components = ncomp[k];
                all[n_all].icl = icl[k];
                n_all++;
            }
            free(ncomp);
            free(icl);
            free(rows);
        }
        if (!st) ghf_summary_print(stdout, all, n_all, key);
        if (!st) warn_missing_slices(argv + optind, ids, n_files, n_rows);
        if (!st && lrt) st = print_lrt(all, n_all, err, sizeof err);
        free(all);
        free(ids);
        free(n_rows);
    }
    ghf_bcast_status(MPI_COMM_WORLD, &st, err, sizeof err);
    if (st) ghf_error0("%s", err);
    return st;
}
