"""Shared ground every layer stands on: errors, the cross-stage records, the run directory, its DuckDB store, the LLM client, progress bars."""
