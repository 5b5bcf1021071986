/* cmd_run.c - `ghfit run JOB` (job files and sweeps) and `ghfit summary`. */
#include "commands.h"
#include "util.h"

int ghf_cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    ghf_error0("run: job files are not implemented yet");
    return GHF_EXIT_USAGE;
}

int ghf_cmd_summary(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    ghf_error0("summary: not implemented yet");
    return GHF_EXIT_USAGE;
}
