# Batch operations: job files and sweeps (ghfit run), ghfit summary,
# checkpoint/restart and preemption, Slurm scripts (label slurm).
ghf_unit_test(NAME test_job SOURCES tests/test_job.c LABELS batch TIMEOUT 60)
