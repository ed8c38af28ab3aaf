"""Invariant: deletion is a pure function of (tree, candidate, strategy, options, seed): the same
inputs give byte-identical `Deletion` records and ids, in any order and in a fresh process;
`choose` picks the same (candidate, strategy) pairs from the same seed, spread over candidates
before strategies; every registered strategy names itself and refuses an unknown name loudly."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from importcheck import import_check

from featdel.core.records import Candidate, Deletion, from_dict, to_json
from featdel.deletion import STRATEGIES, NotApplicable, UnknownStrategy, choose, delete

CORE = '''\
def _helper(x):
    return x + 1


def api(x):
    """Public."""
    total = _helper(x)
    return total * 2


class Thing:
    def run(self):
        return self._step()

    def _step(self):
        return 1
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / "pkg").mkdir()
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/core.py").write_text(CORE)
    return root


def cands() -> list[Candidate]:
    def c(q, k):
        return Candidate(repo="tiny", path="pkg/core.py", qualname=q, kind=k, lines=3, tests=["t::x"])

    return [c("api", "function"), c("Thing", "class"), c("Thing.run", "method"), c("_helper", "function")]


def all_deletions(repo: Path, seed: int, order: list[Candidate]) -> dict[str, str]:
    check = import_check(repo)
    out = {}
    for cand in order:
        for name in sorted(STRATEGIES):
            for keep in (True, False):
                try:
                    d = delete(repo, cand, name, check=check, keep_docstrings=keep, seed=seed)
                except NotApplicable:
                    continue
                out[f"{cand.qualname}/{name}/{keep}"] = to_json(d)
    return out


def test_same_seed_gives_the_same_deletion_in_any_order(repo):
    forward = all_deletions(repo, 7, cands())
    backward = all_deletions(repo, 7, list(reversed(cands())))
    assert forward == backward
    assert {"api/body/True", "api/feature/True", "Thing/class/True", "Thing.run/feature/True"} <= set(forward)


def test_same_deletion_in_a_fresh_process(repo):
    cand = cands()[0]
    here = to_json(delete(repo, cand, "feature", check=import_check(repo), seed=3))
    script = (
        "import sys; from pathlib import Path\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from featdel.deletion import delete\n"
        "from importcheck import import_check\n"
        "from featdel.core.records import Candidate, to_json\n"
        f"c = Candidate(**{dataclasses.asdict(cand)!r})\n"
        "root = Path(sys.argv[1])\n"
        "print(to_json(delete(root, c, 'feature', check=import_check(root), seed=3)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(repo)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == here


def test_deletion_ids_are_stable_and_name_what_changes_the_output(repo):
    check = import_check(repo)
    cand = cands()[0]
    keep = delete(repo, cand, "body", check=check, keep_docstrings=True, seed=1)
    strip = delete(repo, cand, "body", check=check, keep_docstrings=False, seed=1)
    other_seed = delete(repo, cand, "body", check=check, keep_docstrings=True, seed=2)
    assert keep.deletion_id.startswith("tiny__body__") and len(keep.deletion_id) == len("tiny__body__") + 8
    assert keep.deletion_id != strip.deletion_id
    assert other_seed.deletion_id == keep.deletion_id and other_seed.seed == 2
    # removal drops the docstring either way: one deletion, one id, whatever was asked
    gone = [delete(repo, cand, "function", check=check, keep_docstrings=k) for k in (True, False)]
    assert gone[0] == gone[1] and gone[0].keep_docstrings is False
    assert from_dict(Deletion, json.loads(to_json(keep))) == keep


def test_choose_is_seeded_and_spreads_over_candidates_first():
    pool = cands()
    names = list(STRATEGIES)
    a = choose(pool, names, random.Random(5), max_pairs=4)
    b = choose(list(reversed(pool)), names, random.Random(5), max_pairs=4)
    assert a == b
    assert len({c.qualname for c, _ in a}) == 4, "one pair per candidate before any second strategy"
    for c, name in a:
        assert STRATEGIES[name].fits(c)
    everything = choose(pool, names, random.Random(5), max_pairs=100)
    assert len(everything) == len(set((c.qualname, n) for c, n in everything))
    assert ("_helper", "feature") not in {(c.qualname, n) for c, n in everything}
    assert {n for c, n in everything if c.qualname == "api"} == {"body", "function", "feature"}
    orders = {tuple((c.qualname, n) for c, n in choose(pool, names, random.Random(s), 100)) for s in range(6)}
    assert len(orders) > 1, "the seed changes the order"


def test_registry_names_match_and_unknown_names_fail_loudly(repo):
    for name, strat in STRATEGIES.items():
        assert strat.name == name and (strat.kinds or name == "combine")  # combine starts from deletions
    with pytest.raises(UnknownStrategy, match="known: body"):
        delete(repo, cands()[0], "nope", check=import_check(repo))
    with pytest.raises(UnknownStrategy):
        choose(cands(), ["nope"], random.Random(0), 3)
