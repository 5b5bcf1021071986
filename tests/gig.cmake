# GIG helpers (kernels/gig.h) and the GIG M-step solver (src/gig_solver.c).
ghf_unit_test(NAME gig_moments SOURCES tests/test_gig.c LABELS gig TIMEOUT 60)
