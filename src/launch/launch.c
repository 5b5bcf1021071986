/* ghfit-launch - start a program with ghfit's stop signals held back.
 *
 *   ghfit-launch PROGRAM [ARGS...]        (srun ... ghfit-launch ghfit fit ...)
 *
 * A signal that reaches a process after exec and before it has installed its
 * handlers (the dynamic loader mapping some fifty libraries, their
 * constructors, main's first lines) takes its default action: SIGUSR1 or
 * SIGTERM from Slurm or mpirun kills a rank that is still starting, with no
 * message and no checkpoint.  srun's slurmstepd and mpirun's orted reset the
 * signal mask of the tasks they start, so no launcher above them can hold the
 * signals back; this program, started as the task itself, can: it blocks
 * SIGUSR1, SIGTERM, SIGINT and SIGHUP and execs PROGRAM.  The mask survives
 * exec, so a signal sent from here on stays pending until ghfit has installed
 * its handlers; ghfit then unblocks the signals listed in GHFIT_HELD_SIGNALS
 * (set here: those that were not already blocked), and a pending one is
 * delivered and handled as any other stop request.
 *
 * Linked statically where the toolchain allows it (no dynamic loader): the
 * time from exec to the block below is then a few microseconds, against tens
 * of milliseconds (seconds on a cold shared file system) for ghfit itself.
 * Exit status: PROGRAM's; 127 when PROGRAM cannot be run (one line), 2 for
 * a usage error. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    static const int sigs[] = {SIGUSR1, SIGTERM, SIGINT, SIGHUP};
    sigset_t set, old;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&set, sigs[i]);
    sigprocmask(SIG_BLOCK, &set, &old); /* first: nothing before this can be held back */

    if (argc < 2 || argv[1][0] == '-') {
        sigprocmask(SIG_SETMASK, &old, NULL);
        fprintf(stderr, "usage: ghfit-launch PROGRAM [ARGS...]   (runs PROGRAM with SIGUSR1, SIGTERM, SIGINT and "
                        "SIGHUP held until ghfit has installed its handlers)\n");
        return 2;
    }
    char held[64] = "";
    size_t n = 0;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (!sigismember(&old, sigs[i]))
            n += (size_t)snprintf(held + n, sizeof held - n, "%s%d", n ? "," : "", sigs[i]);
    if (n) setenv("GHFIT_HELD_SIGNALS", held, 1);
    execvp(argv[1], argv + 1);
    const int e = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    fprintf(stderr, "ghfit-launch: error: cannot run %s: %s\n", argv[1], strerror(e));
    return 127;
}
