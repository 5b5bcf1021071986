# The univariate laws of a fit (src/law/uni1d.c): cdf, quantiles, VaR, ES
# against 40-digit mpmath references (tests/data/uni1d_ref.csv).
ghf_unit_test(NAME test_uni1d SOURCES tests/test_uni1d.c LABELS law TIMEOUT 120)
