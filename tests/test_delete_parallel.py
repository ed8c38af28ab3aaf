"""The delete stage takes several repositories at a time (`featdel run -j`, `featdel delete -j`):
what each repository gets does not depend on how many run at once, and every line of the run
directory is whole."""

from __future__ import annotations

import json
import shutil

from featdel.core.records import RepoStatus
from featdel.core.rundir import RunDir
from featdel.env.corpus import CorpusEntry
from featdel.env.recipe import Overrides
from featdel.pipeline.context import RepoContext, make_check
from featdel.pipeline.delete import delete_all
from featdel.pipeline.mine import Thresholds, mine
from tests.conftest import TINY_LIB, make_repo


def test_two_repositories_at_a_time_make_the_same_deletions(tmp_path, featdel_cache, local_backend):
    sources = [make_repo(tmp_path / "src" / name, TINY_LIB) for name in ("alib", "blib")]
    mined = tmp_path / "mined"
    records = mine([CorpusEntry(source=str(s), overrides=Overrides()) for s in sources], mined,
                   backend=local_backend, thresholds=Thresholds(min_passing=3, min_coverage=10.0), jobs=2)
    assert [r.status for r in records] == [RepoStatus.MINED] * 2, [r.reason for r in records]
    made = {}
    for jobs in (1, 2):
        run_dir = shutil.copytree(mined, tmp_path / f"j{jobs}")
        steps = []
        delete_all(run_dir, strategies=["body", "function", "feature"], max_candidates=4, seed=0,
                   check_for=lambda r, d=run_dir: make_check(RepoContext.load(d, r), local_backend),
                   on_step=lambda item, step: steps.append((item, step)), jobs=jobs)
        rd = RunDir(run_dir)
        lines = rd.deletions_jsonl.read_text().splitlines() + rd.verdicts_jsonl.read_text().splitlines()
        made[jobs] = sorted(json.dumps(json.loads(line), sort_keys=True) for line in lines)  # every line whole
        assert sorted(item for item, step in steps if step == "done") == sorted(r.name for r in records)
    assert made[1] == made[2] and len({json.loads(x).get("repo") for x in made[1]}) == 2
