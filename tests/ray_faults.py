"""Fault injection for the Ray tests, from outside featdel: a Ray worker setup hook that makes
one candidate's first try kill its worker, so the tests can show Ray's retry.

The cluster fixture starts Ray with `worker_process_setup_hook="tests.ray_faults.install"` and
`$FEATDEL_TEST_DIE_ONCE` naming a plan file. A test writes `DELETION_ID=MARKER` there; the
first worker that verifies that candidate writes its pid to MARKER and exits at once.
"""

from __future__ import annotations

import os
from pathlib import Path

PLAN_VAR = "FEATDEL_TEST_DIE_ONCE"


def install() -> None:
    import featdel.pipeline.executor_ray as ray_executor

    original = ray_executor.verify_task

    def verify_task(record, files, deletion, opts, spec):
        plan = Path(os.environ.get(PLAN_VAR, "/nonexistent"))
        if plan.is_file():
            victim, _, marker = plan.read_text().partition("=")
            if victim == deletion.deletion_id and marker and not os.path.exists(marker):
                Path(marker).write_text(str(os.getpid()))
                os._exit(3)  # a worker killed mid-candidate: Ray must retry the candidate
        return original(record, files, deletion, opts, spec)

    ray_executor.verify_task = verify_task
