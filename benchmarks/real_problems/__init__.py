"""Real tuning problems (benchmarks/real_problems.py): scikit-learn and XGBoost
models on the data sets scikit-learn ships, the adapters that run hypertune and
its peers on them, and the scoring of their JSON lines.

  problems    the problems: spaces as practitioners write them, cross-validated
              noisy losses (all minimized)
  optimizers  one adapter per optimizer: a round of suggestions, then the results
  scoring     the mean normalized score table, head to head, spread, latency
"""
