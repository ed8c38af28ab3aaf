"""featdel: verified coding tasks by feature deletion, and a trainer that learns from them.

Stages (one module each) hand off through files in a run directory:
mine -> delete -> verify -> package. Nothing heavy is imported here, so the CLI starts fast.
"""

__version__ = "0.1.0"
