"""Evaluation: dataset loaders, metrics, judges, paired statistics, the resumable runner and reports."""
