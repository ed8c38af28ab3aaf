"""Grading a patch safely: the grader, the tamper scan, canaries, and `evaluate` over packaged tasks."""
