/* signals.c - stop requests from Slurm (--signal=USR1@T, preemption) or a user. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "h5io.h"

volatile sig_atomic_t ghf_stop_requested = 0;

static void on_stop(int sig)
{
    ghf_stop_requested = sig; /* nonzero: the signal's number */
}

static void set_handler(void (*h)(int), int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

/* Commands that cannot stop cleanly end on the signal, as by its default
 * action, but first remove what they were writing: the temporary file of an
 * output not yet renamed into place and the output's lock file. */
static void on_fatal(int sig)
{
    ghf_out_abandon();
    set_handler(SIG_DFL, sig);
    raise(sig); /* blocked in here: delivered, with the default action, on return */
}

/* SIGINT (Ctrl-C) and SIGHUP (the terminal closed) end every command at once,
 * as by their default action, after the same clean-up as on_fatal: nothing
 * half-written and no lock is left, and what was completed (a checkpoint or
 * output already renamed into place) is kept.  A signal the process was
 * started with ignored (nohup, a background job of a script) stays ignored. */
static void set_interrupt_handler(int sig)
{
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    set_handler(on_fatal, sig);
}

/* Idempotent: main calls it first thing; a request that arrived earlier is kept. */
void ghf_install_stop_handlers(void)
{
    set_handler(on_stop, SIGUSR1);
    set_handler(on_stop, SIGTERM);
    set_interrupt_handler(SIGINT);
    set_interrupt_handler(SIGHUP);
}

void ghf_release_stop_handlers(void)
{
    set_handler(on_fatal, SIGUSR1);
    set_handler(on_fatal, SIGTERM);
    set_interrupt_handler(SIGINT);
    set_interrupt_handler(SIGHUP);
    const int sig = ghf_stop_requested;
    if (sig) raise(sig);
}

/* Signals held back by ghfit-launch (src/launch/launch.c), which lists those it
 * blocked in GHFIT_HELD_SIGNALS: unblocked here, once the handlers are in
 * place, so that one sent while this process was still starting (exec, the
 * dynamic loader) is delivered now and handled as any later one.  Only the
 * four stop signals are taken from the list; the variable is removed so that
 * nothing this process starts inherits it. */
void ghf_unhold_stop_signals(void)
{
    const char *v = getenv("GHFIT_HELD_SIGNALS");
    if (!v) return;
    sigset_t set;
    sigemptyset(&set);
    int any = 0;
    for (const char *c = v; *c;) {
        char *end = NULL;
        const long s = strtol(c, &end, 10);
        if (end == c) break;
        if (s == SIGUSR1 || s == SIGTERM || s == SIGINT || s == SIGHUP) {
            sigaddset(&set, (int)s);
            any = 1;
        }
        c = *end == ',' ? end + 1 : end;
    }
    unsetenv("GHFIT_HELD_SIGNALS");
    if (any) sigprocmask(SIG_UNBLOCK, &set, NULL);
}
