/* cmd_fit.c - `ghfit fit`: one GH or NIG fit of an HDF5 matrix across all ranks. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "resume.h"
#include "commands.h"
#include "em.h"
#include "fit.h"
#include "ghf_version.h"
#include "h5io.h"
#include "iocheck.h"
#include "job.h"
#include "agree.h"
#include "util.h"
#include "xreduce.h"

static void fit_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P ghfit fit --data DATA.h5 --model gh|hyp|nig|vg|t|gauss --out RESULT.h5 [options]\n"
            "  --data FILE          input HDF5 file (N rows x d columns, float32 or float64)\n"
            "  --dataset NAME       dataset inside FILE (default /X)\n"
            "  --model gh|hyp|nig|vg|t|gauss\n"
            "                       family to fit: generalized hyperbolic, hyperbolic (p = (d+1)/2),\n"
            "                       normal inverse Gaussian (p = -1/2), variance gamma (b = 0),\n"
            "                       skewed Student t (a = 0, nu = -2p), Gaussian\n"
            "  --symmetric          gamma held at 0 (a symmetric fit)\n"
            "  --out FILE           result file (written atomically by rank 0)\n"
            "  --max-iter K         EM iteration limit (default %d)\n"
            "  --tol T              stop when the relative change of the log-likelihood and the largest\n"
            "                       relative parameter change (mu, gamma, Sigma, p, a, b) are both < T\n"
            "                       (default %g; 0 runs exactly --max-iter iterations)\n"
            "  --backend B          auto|cpu|cuda (default auto: cuda when every rank has a GPU)\n"
            "  --seed S             seed of the extra random subordinator starts (default 1)\n"
            "  --starts K           GH subordinator starts tried for %d iterations each (default %d)\n"
            "  --p-fixed P          the GIG index p held fixed at P (gh; vg: P > 0; t: P < 0, nu = -2P)\n"
            "  --rows START:LEN     fit a window of rows only\n"
            "  --drop-nonfinite     skip rows with NaN/Inf (counted in the output) instead of failing\n"
            "  --accel A            squarem (default: SQUAREM extrapolation, monotone) or none (plain EM)\n"
            "  --quiet              no per-iteration lines\n"
            "  --checkpoint FILE    write the EM state to FILE (atomically) every --checkpoint-every\n"
            "                       iterations and on SIGUSR1/SIGTERM (then exit status 75)\n"
            "  --checkpoint-every K iterations between checkpoints (default %d)\n"
            "  --resume             continue from --checkpoint FILE (same data and options)\n",
            GHF_DEFAULT_MAX_ITER, GHF_DEFAULT_TOL, GHF_DEFAULT_START_ITERS, GHF_DEFAULT_STARTS,
            GHF_JOB_DEFAULT_CKPT_EVERY);
}

typedef struct fit_args {
    const char *data, *dataset, *model, *out, *backend;
    int max_iter, starts, quiet, drop_nonfinite, fix_p, accel, symmetric;
    double tol, p_fixed;
    int64_t seed, win_start, win_len;
    const char *checkpoint; /* checkpoint options (src/resume/resume.h) */
    int ckpt_every, resume;
} fit_args;

static int parse_window(const char *s, int64_t *start, int64_t *len)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    char *c = strchr(buf, ':');
    if (!c) return -1;
    *c = '\0';
    if (ghf_parse_int64(buf, start) != 0 || *start < 0) return -1;
    if (c[1] == '\0') {
        *len = -1;
        return 0;
    }
    return (ghf_parse_int64(c + 1, len) == 0 && *len > 0) ? 0 : -1;
}

static int parse_fit_args(int argc, char **argv, fit_args *a)
{
    memset(a, 0, sizeof *a);
    a->dataset = "/X";
    a->backend = "auto";
    a->max_iter = GHF_DEFAULT_MAX_ITER;
    a->tol = GHF_DEFAULT_TOL;
    a->starts = GHF_DEFAULT_STARTS;
    a->seed = 1;
    a->win_len = -1;
    a->ckpt_every = GHF_JOB_DEFAULT_CKPT_EVERY;
    a->accel = 1;
    enum { O_DATA = 256, O_DATASET, O_MODEL, O_OUT, O_MAXIT, O_TOL, O_BACKEND, O_SEED, O_QUIET, O_DROP,
           O_STARTS, O_PFIX, O_ROWS, O_ACCEL, O_HELP, O_CKPT, O_CKPT_EVERY, O_RESUME, O_SYM };
    static const struct option opts[] = {
        {"data", required_argument, 0, O_DATA},       {"dataset", required_argument, 0, O_DATASET},
        {"model", required_argument, 0, O_MODEL},     {"out", required_argument, 0, O_OUT},
        {"max-iter", required_argument, 0, O_MAXIT},  {"tol", required_argument, 0, O_TOL},
        {"backend", required_argument, 0, O_BACKEND}, {"seed", required_argument, 0, O_SEED},
        {"quiet", no_argument, 0, O_QUIET},           {"drop-nonfinite", no_argument, 0, O_DROP},
        {"starts", required_argument, 0, O_STARTS},   {"p-fixed", required_argument, 0, O_PFIX},
        {"rows", required_argument, 0, O_ROWS},       {"help", no_argument, 0, O_HELP},
        {"accel", required_argument, 0, O_ACCEL},
        {"checkpoint", required_argument, 0, O_CKPT}, {"checkpoint-every", required_argument, 0, O_CKPT_EVERY},
        {"resume", no_argument, 0, O_RESUME},         {"symmetric", no_argument, 0, O_SYM},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_DATA: a->data = optarg; break;
        case O_DATASET: a->dataset = optarg; break;
        case O_MODEL: a->model = optarg; break;
        case O_OUT: a->out = optarg; break;
        case O_BACKEND: a->backend = optarg; break;
        case O_QUIET: a->quiet = 1; break;
        case O_DROP: a->drop_nonfinite = 1; break;
        case O_MAXIT:
            if (ghf_parse_int(optarg, &a->max_iter) || a->max_iter < 0) {
                ghf_error0("--max-iter: '%s' is not a non-negative integer", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_TOL:
            if (ghf_parse_double(optarg, &a->tol) || a->tol < 0) {
                ghf_error0("--tol: '%s' is not a non-negative number", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_SEED:
            if (ghf_parse_int64(optarg, &a->seed) || a->seed < 0) {
                ghf_error0("--seed: '%s' is not a non-negative integer", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_STARTS:
            if (ghf_parse_int(optarg, &a->starts) || a->starts < 1 || a->starts > 16) {
                ghf_error0("--starts: '%s' is not an integer in 1..16", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_PFIX:
            if (ghf_parse_double(optarg, &a->p_fixed) || fabs(a->p_fixed) > 1e6) {
                ghf_error0("--p-fixed: '%s' is not a number in [-1e6, 1e6]", optarg);
                return GHF_EXIT_USAGE;
            }
            a->fix_p = 1;
            break;
        case O_ROWS:
            if (parse_window(optarg, &a->win_start, &a->win_len)) {
                ghf_error0("--rows: '%s' is not START:LEN (e.g. 0:1000) or START:", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_ACCEL:
            if (strcmp(optarg, "squarem") == 0) a->accel = 1;
            else if (strcmp(optarg, "none") == 0) a->accel = 0;
            else {
                ghf_error0("--accel: '%s' is not squarem or none", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_CKPT: a->checkpoint = optarg; break;
        case O_RESUME: a->resume = 1; break;
        case O_SYM: a->symmetric = 1; break;
        case O_CKPT_EVERY:
            if (ghf_parse_int(optarg, &a->ckpt_every) || a->ckpt_every < 1) {
                ghf_error0("--checkpoint-every: '%s' is not a positive integer", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_HELP:
            return -1;
        default:
            ghf_error0("fit: unknown or incomplete option '%s' (see ghfit fit --help)", argv[optind - 1]);
            return GHF_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ghf_error0("fit: unexpected argument '%s'", argv[optind]);
        return GHF_EXIT_USAGE;
    }
    if (!a->data) { ghf_error0("fit: --data is required"); return GHF_EXIT_USAGE; }
    if (!a->out) { ghf_error0("fit: --out is required"); return GHF_EXIT_USAGE; }
    if (!a->model) { ghf_error0("fit: --model is required (%s)", ghf_family_list()); return GHF_EXIT_USAGE; }
    ghf_family fam;
    if (ghf_family_parse(a->model, &fam) != 0) {
        ghf_error0("--model: unknown model '%s' (expected %s)", a->model, ghf_family_list());
        return GHF_EXIT_USAGE;
    }
    if (strcmp(a->backend, "auto") && strcmp(a->backend, "cpu") && strcmp(a->backend, "cuda")) {
        ghf_error0("--backend: unknown backend '%s' (expected auto, cpu or cuda)", a->backend);
        return GHF_EXIT_USAGE;
    }
    if (a->resume && !a->checkpoint) {
        ghf_error0("--resume needs --checkpoint FILE");
        return GHF_EXIT_USAGE;
    }
    {
        const ghf_model m = {fam, a->symmetric, a->fix_p, a->p_fixed};
        char why[256];
        if (ghf_model_check(&m, 1, why, sizeof why)) {
            ghf_error0("%s", why);
            return GHF_EXIT_USAGE;
        }
    }
    return 0;
}

int ghf_cmd_fit(int argc, char **argv)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    fit_args a;
    const int prc = parse_fit_args(argc, argv, &a);
    if (prc < 0) {
        if (rank == 0) fit_usage(stdout);
        return GHF_EXIT_OK;
    }
    if (prc) return prc;
    ghf_family fam;
    ghf_family_parse(a.model, &fam);

    const double t0 = MPI_Wtime();
    char err[1024] = "";
    /* inputs (data set, shape, window) before outputs (paths, signatures, locks) */
    const ghf_io_plan plan = {a.data, a.dataset, a.win_start, a.win_len, 1, size, NULL,
                              a.out, GHF_PATH_RESULT, NULL, a.checkpoint};
    int st = ghf_io_check(comm, &plan, NULL, NULL, err, sizeof err);
    if (st) {
        ghf_error0("%s", err);
        return st;
    }

    /* read the shard */
    ghf_read_opts ro = {a.data, a.dataset, a.win_start, a.win_len, 1, a.drop_nonfinite, GHF_ROW_BLOCK};
    ghf_shard shard;
    st = ghf_h5_read_shard(comm, &ro, &shard, err, sizeof err);
    if (st) {
        ghf_error0("%s", err);
        return st;
    }
    const double t_read = MPI_Wtime() - t0;

    char what[512];
    snprintf(what, sizeof what, "%s:%s", a.data, a.dataset);
    ghf_data data;
    st = ghf_data_prepare(comm, &shard, what, &data, err, sizeof err);
    if (st) {
        ghf_error0("%s", err);
        ghf_shard_free(&shard);
        return st;
    }
    ghf_backend *be = ghf_backend_create(comm, a.backend, data.x, data.nrows, data.d, &st, err, sizeof err);
    if (!be) {
        ghf_error0("%s", err);
        ghf_data_free(&data);
        ghf_shard_free(&shard);
        return st ? st : GHF_EXIT_RUNTIME;
    }
    if (!a.quiet && rank == 0)
        printf("ghfit %s: %s fit of %s (%lld x %d) on %d rank%s, backend %s\n", GHFIT_VERSION, a.model, what,
               (long long)data.n_global, data.d, size, size == 1 ? "" : "s", be->name);

    ghf_em_opts eo;
    ghf_em_opts_defaults(&eo);
    eo.family = fam;
    eo.max_iter = a.max_iter;
    eo.tol = a.tol;
    eo.seed = (uint64_t)a.seed;
    eo.n_starts = a.starts;
    eo.quiet = a.quiet;
    eo.accel = a.accel;
    ghf_data_em_opts(&data, &eo);
    eo.stop_flag = &ghf_stop_requested;
    if (a.fix_p) {
        eo.fix_p = 1;
        eo.p_fixed = a.p_fixed;
    }
    eo.symmetric = a.symmetric;
    ghf_fit_out out;
    memset(&out, 0, sizeof out);
    snprintf(out.name, sizeof out.name, "%s", a.model);
    out.family = fam;
    out.symmetric = a.symmetric;
    out.fix_p = a.fix_p;
    out.p_fixed = a.p_fixed;
    out.n_dropped = shard.n_dropped;
    /* checkpoint/resume (src/resume/resume.c): the identity is the data, N, d and the options */
    char hs[1024];
    snprintf(hs, sizeof hs, "fit|%s|%lld|%lld|%d|%d|%.17g|%lld|%d|%d|%.17g|%s|%d", a.model, (long long)a.win_start,
             (long long)a.win_len, a.drop_nonfinite, a.max_iter, a.tol, (long long)a.seed, a.starts, a.fix_p,
             a.fix_p ? a.p_fixed : 0.0, a.backend, a.accel + 2 * a.symmetric);
    const ghf_ckpt_id cid = {"fit", a.data, a.dataset, data.n_global, data.d,
                             ghf_hash_bytes(GHF_HASH_INIT, hs, strlen(hs)), 1, NULL, 0, 0};
    ghf_fit_ckpt ck;
    int rc = ghf_fit_ckpt_setup(comm, &ck, a.checkpoint, a.ckpt_every, a.resume, &cid, a.model, a.max_iter, &eo,
                                err, sizeof err);
    if (rc) {
        ghf_error0("%s", err);
        goto done;
    }
    if (ck.have_resume && !a.quiet && rank == 0)
        printf("resuming from %s at iteration %d\n", a.checkpoint, ck.resume.iter);
    rc = ghf_em_fit(comm, be, data.d, &eo, &out.em, err, sizeof err);
    if (rc) {
        ghf_error0("%s", err);
        goto done;
    }
    if (out.em.outcome == GHF_EM_INTERRUPTED) {
        int wrote = ck.wrote_final;
        MPI_Bcast(&wrote, 1, MPI_INT, 0, comm);
        if (!a.checkpoint) {
            ghf_note0("stopped on a signal before convergence (no checkpoint file was requested)");
            rc = GHF_EXIT_CHECKPOINT;
        } else if (wrote) {
            ghf_note0("stopped on a signal at iteration %d; checkpoint written to %s (rerun with --resume)",
                       ck.last_iter, a.checkpoint);
            rc = GHF_EXIT_CHECKPOINT;
        } else {
            ghf_error0("stopped on a signal, but the checkpoint could not be written: %s", ck.final_err);
            rc = GHF_EXIT_RUNTIME;
        }
        goto done;
    }
    if (out.em.outcome == GHF_EM_FAILED) {
        ghf_error0("%s: %s", what, out.em.status);
        rc = GHF_EXIT_RUNTIME;
        goto done;
    }
    out.phases[GHF_PH_READ] = t_read;
    out.phases[GHF_PH_INIT] = out.em.t_init;
    out.phases[GHF_PH_ESTEP] = out.em.t_estep;
    out.phases[GHF_PH_ALLREDUCE] = out.em.t_allreduce;
    out.phases[GHF_PH_MSTEP] = out.em.t_mstep;
    ghf_fit_out_finish(&out, &data);

    /* write (rank 0) */
    const double tw = MPI_Wtime();
    out.phases[GHF_PH_WRITE] = 0.0;
    out.phases[GHF_PH_TOTAL] = tw - t0;
    ghf_fit_out_gather(comm, &out);
    st = 0;
    if (rank == 0) {
        ghf_out_meta meta = {GHFIT_VERSION, GHFIT_GIT_COMMIT, ghf_command_line(), be->name, size, NULL};
        ghf_h5_writer *w = ghf_h5_out_open(a.out, &meta, err, sizeof err);
        if (!w) {
            st = GHF_EXIT_RUNTIME;
        } else {
            ghf_fit_record rec;
            /* the write phase of rank 0 is known only after writing: record it as measured so far */
            ghf_fit_out_record(&out, be->name, &rec);
            rec.device = be->device;
            st = ghf_h5_out_add_fit(w, &rec, err, sizeof err);
            if (!st) {
                /* rank 0's write phase so far (the others do not write) */
                const double tw1 = MPI_Wtime();
                out.all_phases[GHF_PH_WRITE] = tw1 - tw;
                out.all_phases[GHF_PH_TOTAL] = tw1 - t0;
                st = ghf_h5_out_set_profile(w, out.name, size, GHF_NPHASES, out.all_phases, err, sizeof err);
            }
            if (st) {
                ghf_h5_out_abort(w);
            } else {
                st = ghf_h5_out_commit(w, err, sizeof err);
            }
        }
    }
    ghf_bcast_status(comm, &st, err, sizeof err);
    out.phases[GHF_PH_WRITE] = MPI_Wtime() - tw;
    out.phases[GHF_PH_TOTAL] = MPI_Wtime() - t0;
    if (st) {
        ghf_error0("%s", err);
        rc = st;
        goto done;
    }
    if (rank == 0 && a.checkpoint) ghf_ckpt_remove(a.checkpoint); /* the result supersedes it */
    ghf_fit_out_gather(comm, &out);
    if (rank == 0) {
        if (!a.quiet) ghf_fit_out_print(&out, 1);
        if (out.em.n_decrease > 0)
            fprintf(stderr, "ghfit: warning: the log-likelihood decreased in %d iteration(s)\n", out.em.n_decrease);
    }
done:
    ghf_fit_ckpt_free(&ck);
    ghf_fit_out_free(&out);
    be->destroy(be);
    ghf_data_free(&data);
    ghf_shard_free(&shard);
    return rc;
}
