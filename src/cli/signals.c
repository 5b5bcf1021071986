/* signals.c - stop requests from Slurm (--signal=USR1@T, preemption) or a user. */
#include <signal.h>
#include <string.h>

#include "commands.h"

volatile sig_atomic_t ghf_stop_requested = 0;

static void on_stop(int sig)
{
    ghf_stop_requested = sig; /* nonzero: the signal's number */
}

static void set_handler(void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* Idempotent: main calls it first thing; a request that arrived earlier is kept. */
void ghf_install_stop_handlers(void) { set_handler(on_stop); }

void ghf_release_stop_handlers(void)
{
    set_handler(SIG_DFL);
    const int sig = ghf_stop_requested;
    if (sig) raise(sig);
}
