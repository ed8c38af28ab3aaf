"""Other tools' formats: SWE-bench rows, Harbor folders, the Hugging Face Hub, materialized start states."""
