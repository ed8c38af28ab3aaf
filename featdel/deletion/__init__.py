"""Deletion strategies: one registry, seeded and deterministic (see `registry.py`)."""
