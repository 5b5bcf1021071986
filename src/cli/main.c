/* main.c - the ghfit program: subcommand dispatch, MPI start and end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "resume.h"
#include "commands.h"
#include "em.h"
#include "ghf_version.h"
#include "util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "ghfit %s - Generalized Hyperbolic family fits (gh, hyp, nig, vg, t, gauss) by distributed EM\n"
            "\n"
            "usage:\n"
            "  ghfit generate --model gh|hyp|nig|vg|t|gauss --dim D --n N --seed S --out DATA.h5\n"
            "                 [--dataset /X] [--dtype float64|float32] [model parameters]\n"
            "  mpirun -np P ghfit fit --data DATA.h5 [--dataset /X] --model gh|hyp|nig|vg|t|gauss --out RESULT.h5\n"
            "                         [--symmetric] [--p-fixed P] [--sigma full|diag|factor:R] [--max-iter K] [--tol T]\n"
            "                         [--backend auto|cpu|cuda] [--seed S] [--quiet] [--checkpoint FILE] [--resume]\n"
            "  mpirun -np P ghfit run JOB.yaml [overrides]      job files and parameter sweeps\n"
            "  ghfit check [--ranks P] fit|run ARGS...          what fit or run would refuse, in seconds, fitting nothing\n"
            "  ghfit check eval|gof|sample|risk|optimize ARGS... what that command would refuse, in seconds\n"
            "  ghfit summary RESULT.h5... [--sort aic|bic|loglik|name] [--lrt]   likelihood-ratio tests\n"
            "  mpirun -np P ghfit eval --model RESULT.h5[:/fits/NAME] --data X.h5 [--dataset /X] --out SCORES.h5\n"
            "  mpirun -np P ghfit sample --model RESULT.h5[:/fits/NAME] --n N --seed S --out X.h5 [--dataset /X]\n"
            "  [mpirun -np P] ghfit risk --model RESULT.h5[:/fits/NAME] --portfolios W.h5[:/W] --alpha A[,A...] --out RISK.h5\n"
            "  [mpirun -np P] ghfit gof --model RESULT.h5[:/fits/NAME] --data X.h5 [--dataset /X] --out GOF.h5 [--qq Q]\n"
            "  ghfit optimize --model RESULT.h5[:/fits/NAME] --measure sd|var|es --out OPT.h5 [--alpha A]\n"
            "                 [--type min-risk|target-return|tangency|frontier] [--long-only] [--bounds LO,HI] ...\n"
            "  ghfit --help | --version\n"
            "\n"
            "fit defaults: --tol %g (relative change of the log-likelihood AND of every parameter, p, a, b\n"
            "included), --max-iter %d, --backend auto; these reach the maximum likelihood to about 1e-8\n"
            "relative on ordinary data.  'ghfit CMD --help' lists every option of CMD.\n"
            "\n"
            "exit status: 0 done (the fit's status is in the result file), 1 run-time failure,\n"
            "2 bad input or usage, 3 (run) finished but some fits failed (status 'failed: ...'),\n"
            "75 stopped on SIGUSR1/SIGTERM after writing a checkpoint (resubmit).\n"
            "backends compiled in: %s\n",
            GHFIT_VERSION, GHF_DEFAULT_TOL, GHF_DEFAULT_MAX_ITER, ghf_backends_compiled());
}

/* Test hook GHFIT_TEST_LOAD_SLEEP=MS: sleeps before main, where the dynamic
 * loader and the libraries' constructors run (seconds on a cold shared file
 * system) and no handler of ghfit's exists yet: tests/faults_launch.sh and
 * tests/batch_slurm_early.sh signal ranks there. */
__attribute__((constructor)) static void test_load_sleep(void)
{
    const char *s = getenv("GHFIT_TEST_LOAD_SLEEP");
    if (s) ghf_sleep_ms(atoi(s));
}

/* fit and run turn SIGUSR1/SIGTERM into a clean stop; the others end on it, leaving no
 * temporary or lock file (signals.c) */
static int stoppable(const char *cmd) { return cmd && (strcmp(cmd, "fit") == 0 || strcmp(cmd, "run") == 0); }

int main(int argc, char **argv)
{
    /* First: a stop requested from here on is kept and honoured once start-up is
     * done (a Slurm --signal=USR1@T can arrive during MPI_Init on a short job). */
    ghf_install_stop_handlers();
    /* Started by ghfit-launch (ghfit.sbatch does), the stop signals were blocked from
     * exec on, the dynamic loader's time included: let them in now. */
    ghf_unhold_stop_signals();
    /* The log of a batch job must follow the run: flush every line. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* test hook: a start-up slow enough to be signalled in (tests/faults_signals.sh) */
    const char *ss = getenv("GHFIT_TEST_STARTUP_SLEEP");
    if (ss) ghf_sleep_ms(atoi(ss));
    if (!stoppable(argc >= 2 ? argv[1] : NULL)) ghf_release_stop_handlers();
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0)) {
        printf("ghfit %s (git %s)\nbackends: %s\n", GHFIT_VERSION, GHFIT_GIT_COMMIT, ghf_backends_compiled());
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? GHF_EXIT_USAGE : 0;
    }
    ghf_set_command_line(argc, argv);
    /* check runs in one process without MPI: on a login node, and in a batch
     * script before srun (where a singleton MPI_Init is not to be relied on) */
    if (strcmp(argv[1], "check") == 0) return ghf_cmd_check(argc - 1, argv + 1);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    /* again, should MPI_Init have replaced them */
    if (stoppable(argv[1])) ghf_install_stop_handlers();
    else ghf_release_stop_handlers();
    int rc;
    const char *cmd = argv[1];
    if (strcmp(cmd, "fit") == 0) rc = ghf_cmd_fit(argc - 1, argv + 1);
    else if (strcmp(cmd, "generate") == 0) rc = ghf_cmd_generate(argc - 1, argv + 1);
    else if (strcmp(cmd, "run") == 0) rc = ghf_cmd_run(argc - 1, argv + 1);
    else if (strcmp(cmd, "summary") == 0) rc = ghf_cmd_summary(argc - 1, argv + 1);
    else if (strcmp(cmd, "eval") == 0) rc = ghf_cmd_eval(argc - 1, argv + 1);
    else if (strcmp(cmd, "sample") == 0) rc = ghf_cmd_sample(argc - 1, argv + 1);
    else if (strcmp(cmd, "risk") == 0) rc = ghf_cmd_risk(argc - 1, argv + 1);
    else if (strcmp(cmd, "gof") == 0) rc = ghf_cmd_gof(argc - 1, argv + 1);
    else if (strcmp(cmd, "optimize") == 0) rc = ghf_cmd_optimize(argc - 1, argv + 1);
    else {
        ghf_error0("unknown command '%s' (expected generate, fit, run, check, summary, eval, sample, risk, gof or optimize; see ghfit --help)", cmd);
        rc = GHF_EXIT_USAGE;
    }
    /* Every command returns the same status on every rank (errors are agreed
     * collectively), so a plain finalize ends all ranks together. */
    MPI_Finalize();
    return rc;
}
