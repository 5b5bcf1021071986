/* cmd_sample.c - `ghfit sample`: placeholder, filled below. */
#include "commands.h"
#include "util.h"
int ghf_cmd_sample(int argc, char **argv) { (void)argc; (void)argv; ghf_error0("sample: not yet"); return GHF_EXIT_USAGE; }
