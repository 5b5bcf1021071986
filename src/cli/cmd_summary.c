/* cmd_summary.c - `ghfit summary RESULT.h5...`: the /summary tables of
 * result files as one sorted table. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "agree.h"
#include "commands.h"
#include "h5io.h"
#include "lrt.h"
#include "summary.h"
#include "util.h"

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
                printf("usage: ghfit summary RESULT.h5... [--sort aic|bic|loglik|name] [--lrt]\n"
                       "  prints the /summary tables of the result files as one table, sorted by the\n"
                       "  chosen column (default aic; loglik sorts the largest first), with the difference\n"
                       "  to the best fit (dAIC, dBIC, dloglik)\n"
                       "  --lrt  adds likelihood-ratio tests between the nested models fitted to the same\n"
                       "         data: symmetric vs asymmetric (d df), a fixed p (nig, hyp, --p-fixed) vs gh\n"
                       "         (1 df), vg and t vs gh (a boundary: 0.5 chi2(0) + 0.5 chi2(1))\n");
            return GHF_EXIT_OK;
        }
        if (c == 'l') {
            lrt = 1;
            continue;
        }
        if (c == 's') {
            if (ghf_sort_key_parse(optarg, &key) != 0) {
                ghf_error0("--sort: '%s' is not aic, bic, loglik or name", optarg);
                return GHF_EXIT_USAGE;
            }
            continue;
        }
        ghf_error0("summary: unknown or incomplete option '%s' (see ghfit summary --help)", argv[optind - 1]);
        return GHF_EXIT_USAGE;
    }
    if (optind >= argc) {
        ghf_error0("summary: no result files given (usage: ghfit summary RESULT.h5... [--sort aic|bic|loglik|name])");
        return GHF_EXIT_USAGE;
    }
    /* serial work on rank 0; the others wait for the status */
    int st = 0;
    char err[1024] = "";
    if (rank == 0) {
        ghf_summary_row *all = NULL;
        int n_all = 0;
        for (int i = optind; i < argc && !st; i++) {
            ghf_fit_summary *rows = NULL;
            int n = 0;
            st = ghf_h5_read_fit_summary(argv[i], &rows, &n, err, sizeof err);
            if (st) break;
            ghf_summary_row *na = realloc(all, (size_t)(n_all + n + 1) * sizeof *all);
            if (!na) {
                free(rows);
                st = GHF_EXIT_RUNTIME;
                snprintf(err, sizeof err, "out of memory");
                break;
            }
            all = na;
            for (int k = 0; k < n; k++) {
                all[n_all].s = rows[k];
                all[n_all].file = argv[i];
                n_all++;
            }
            free(rows);
        }
        if (!st) ghf_summary_print(stdout, all, n_all, key);
        if (!st && lrt) st = print_lrt(all, n_all, err, sizeof err);
        free(all);
    }
    ghf_bcast_status(MPI_COMM_WORLD, &st, err, sizeof err);
    if (st) ghf_error0("%s", err);
    return st;
}
