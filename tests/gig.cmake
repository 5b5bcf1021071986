# GIG helpers (kernels/gig.h) and the GIG M-step solver (src/family/gig_solver.c).
ghf_unit_test(NAME gig_moments SOURCES tests/test_gig.c LABELS gig TIMEOUT 60)
ghf_unit_test(NAME gig_solver SOURCES tests/test_gig_solver.c LABELS gig TIMEOUT 60)
