"""The RL trainer (imported as `featdel.trainer`). Needs the `train` extra (torch)."""
