"""Environments and test runs: sources, corpora, recipes and locks, virtualenvs and images, the test runner and its pytest plugin."""
