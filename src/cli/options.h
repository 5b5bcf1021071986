/* options.h - the one option table of `ghfit fit` and `ghfit run`: every
 * option sets a field of the job (job.h), so that `ghfit fit` is a job of
 * one fit and the overrides of `ghfit run` are the same options. */
#ifndef GHF_OPTIONS_H
#define GHF_OPTIONS_H

#include <stdio.h>

#include "job.h"

enum { GHF_OPT_FIT = 1, GHF_OPT_RUN = 2 };

/* Parses argv (argv[0] is the command) against the options of cmd.
 * apply = 0: only checks the options and finds the positional arguments
 * (their indices into pos[], at most max_pos; *n_pos their number);
 * apply = 1: also sets the job's fields, in order.  Returns 0, -1 for
 * --help, or GHF_EXIT_USAGE after printing one error line. */
int ghf_opts_parse(unsigned cmd, int argc, char **argv, int apply, ghf_job *j, int *pos, int max_pos, int *n_pos);

/* The option lines of cmd's usage text. */
void ghf_opts_usage(unsigned cmd, FILE *f);

#endif
