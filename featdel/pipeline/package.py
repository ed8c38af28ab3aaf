"""Stage 4, package: verified tasks and their environments as Parquet shards.

In: a verified run directory. Out: `RUN_DIR/tasks/tasks-NNNNN.parquet` and
`RUN_DIR/envs/envs-NNNNN.parquet`, each with one Arrow schema declared here. Columns follow
SWE-bench where they overlap; `patch` has the SWE-bench meaning (the gold fix: applied to the
start state it restores the feature) and `deletion_patch` takes the original tree to the start
state. FAIL_TO_PASS and PASS_TO_PASS are real lists. The env's `snapshot` (the original tree,
tar.gz, no VCS data) is stored once per repo@commit, so a task is self-contained offline:
start state = extract snapshot, `git apply deletion_patch`.

The env rows are the interface `featdel env build`, the exports and publishing rely on
(ENV_SCHEMA, one row per environment):

    env_id        f"{repo}-{sha256(json {repo, commit, python, lock})[:16]}" (featdel.env.envs.env_id):
                  content-addressed, so two machines that build the same env agree on it; a
                  task's `env_id` names its row. Built locally, the env is found at
                  `cache_root()/"envs"/env_id` (mining links that name to its build directory).
    repo          the repo name ("cachetools-5.5.0"), as in the task rows
    source        where the code came from, never a local path: `pypi:NAME==VERSION`, a git URL,
                  or `local:NAME` (featdel.env.sources.public_source)
    base_commit   the commit the snapshot holds
    python        the exact interpreter version the env was built and locked with ("3.11.7")
    install       the recipe's argv lists, run in order in the tree with the venv active
    test_cmd      argv starting `python -m pytest`; modules that could not be collected at
                  baseline appear as `--ignore=PATH`
    package_dirs  the library's import roots, relative to the tree
    snapshot      the original tree, tar.gz, no VCS data
    lock          `NAME==VERSION` of every distribution the install left in the venv (pip freeze
                  --all, the repo itself left out), sorted: `pip install --no-deps` of these plus
                  `pip install --no-deps -e .` of the tree rebuilds the env
    license       the source's licence, from package metadata or its LICENSE file ("MIT",
                  "Apache-2.0", ...), "unknown" when neither says
    language      "python", "javascript" or "typescript" (featdel.lang), as mining detected it;
                  the task rows carry it too. For JavaScript, `python` is empty, `test_cmd` is
                  the runner and its arguments (`["mocha", "test/"]`), `install` npm's commands
                  and `lock` `node@VERSION` and `PATH@VERSION` of every locked package
    install_files what the install read besides the tree ({path, text}: a JavaScript env's
                  package.json, package-lock.json and .npmrc, the lock npm resolved when the
                  tree had none); empty for Python, whose `lock` says it all

Task rows: `created_at` is when the task was verified (`Verdict.verified_at`), so packaging
again does not rewrite it; `instance_id` is the deletion id (which already differs with
docstrings kept or stripped), with `__hidden` appended when the F2P test files are hidden.
"""

from __future__ import annotations

import datetime as dt
import re
import tarfile
import tempfile
import tomllib
from pathlib import Path

from featdel.code import trees
from featdel.core import shards
from featdel.core.errors import RunDirError
from featdel.core.records import Deletion, RepoRecord, Verdict, VerdictStatus
from featdel.core.rundir import RunDir
from featdel.core.shards import image_tag
from featdel.deletion import difficulty
from featdel.env.sources import public_source


def env_id(record: RepoRecord) -> str:
    return shards.env_id(record.name, record.commit or "", record.recipe)


def instance_id(deletion: Deletion, *, hide_tests: bool) -> str:
    return f"{deletion.deletion_id}__hidden" if hide_tests else deletion.deletion_id


def package(run_dir: Path, *, max_tasks: int | None = None, hide_tests: bool = False) -> tuple[int, int]:
    """Write the shards (replacing earlier ones); return (tasks, envs) written. With
    `hide_tests`, the start state also lacks the files of the F2P tests, and `test_patch`
    (SWE-bench meaning: applied before grading) brings them back."""
    rd = RunDir(run_dir)
    rd.stage_options("packaged", {"hide_tests": hide_tests, "max_tasks": max_tasks}, started=False)
    records = {r.name: r for r in rd.latest_repos().values()}
    deletions = {d.deletion_id: d for d in rd.deletions()}
    verified = [v for v in rd.verdicts() if v.status == VerdictStatus.VERIFIED]
    steering = rd.steering()
    rows, used = [], {}
    for v in sorted(verified, key=lambda v: v.deletion_id)[:max_tasks]:
        record, deletion = records[v.repo], deletions[v.deletion_id]
        used[v.repo] = record
        knobs = steering.get(v.deletion_id)  # a steered task's own tests-visible knob
        row = task_row(run_dir, record, deletion, v, hide_tests=hide_tests if knobs is None
                       else not knobs.tests_visible)
        rows.append(row | {"steering": {f.name: getattr(knobs, f.name) for f in shards.STEERING} if knobs else None})
    env_rows = [env_row(run_dir, r) for r in sorted(used.values(), key=lambda r: r.name)]
    shards.write(rd.tasks_dir, "tasks", rows, shards.TASK_SCHEMA)
    shards.write(rd.envs_dir, "envs", env_rows, shards.ENV_SCHEMA)
    return len(rows), len(env_rows)


def task_row(run_dir: Path, record: RepoRecord, deletion: Deletion, verdict: Verdict, *,
             hide_tests: bool = False) -> dict:
    snapshot = RunDir(run_dir).snapshot(record.name)
    # What ships is what verify checked: its patches and statement, and a start state whose hash
    # matches the one it tested. Hidden tests: the F2P test files leave the start state and
    # `test_patch` restores them; the graded tree (start + patch + test_patch) is the verified one.
    deletion_patch, patch, test_patch = verdict.deletion_patch, verdict.patch, ""
    with tempfile.TemporaryDirectory(prefix="featdel-pkg-") as tmp:
        start = trees.start_state(snapshot, deletion_patch, Path(tmp) / "start", commit=False)  # .git is not hashed
        if trees.tree_digest(start) != verdict.start_sha256:
            raise RunDirError(f"{deletion.deletion_id}: the start state differs from the one verified; "
                              "run `featdel verify` again")
        feats = difficulty.features(deletion, start, verdict.FAIL_TO_PASS, verdict.PASS_TO_PASS,
                                    similar=verdict.similarity)
    feats.update(tests_visible=not hide_tests)
    if hide_tests:
        hidden = {t.split("::")[0]: None for t in verdict.FAIL_TO_PASS}
        start_files = {**deletion.files, **hidden}
        deletion_patch = trees.diff_states(snapshot, {}, start_files)
        patch = trees.diff_states(snapshot, start_files, hidden)
        test_patch = trees.diff_states(snapshot, hidden, {})
    text = verdict.problem_statement
    created = dt.datetime.fromisoformat(verdict.verified_at)
    return {
        "instance_id": instance_id(deletion, hide_tests=hide_tests), "repo": record.name,
        "source": public_source(record.source),
        "base_commit": record.commit, "environment_setup_commit": record.commit, "env_id": env_id(record),
        "patch": patch, "deletion_patch": deletion_patch, "test_patch": test_patch, "problem_statement": text,
        "hints_text": "", "FAIL_TO_PASS": verdict.FAIL_TO_PASS, "PASS_TO_PASS": verdict.PASS_TO_PASS,
        "test_cmd": record.recipe.test_cmd, "strategy": deletion.strategy,
        "deleted_symbols": deletion.deleted_symbols, "difficulty": feats,
        # The image `featdel env build --sandbox docker` makes from the env row: a pure function
        # of env_id, so any machine can build it and find it (issue 9).
        "image_name": image_tag(env_id(record)),
        "timeout_s": verdict.timeout_s, "start_sha256": verdict.start_sha256, "created_at": created,
        "language": record.language,
    }


def env_row(run_dir: Path, record: RepoRecord) -> dict:
    snapshot = RunDir(run_dir).snapshot(record.name)
    return {
        "env_id": env_id(record), "repo": record.name, "source": public_source(record.source),
        "base_commit": record.commit, "python": record.recipe.python, "install": record.recipe.install,
        "test_cmd": record.recipe.test_cmd, "package_dirs": record.recipe.package_dirs,
        "snapshot": snapshot.read_bytes(), "lock": record.recipe.lock, "license": license_of(snapshot),
        "language": record.language, "install_files": _install_files(record),
    }


def _install_files(record: RepoRecord) -> list[dict]:
    """What the env's install read besides the tree (featdel.lang: a JavaScript env's package.json
    and lock), so `featdel env build` rebuilds it from the row alone."""
    from featdel.lang import language

    if record.language == "python" or not record.env_dir:
        return []
    return language(record.language).install_files(Path(record.env_dir))


_SPDX = {"mit": "MIT", "mit license": "MIT", "apache 2.0": "Apache-2.0", "apache-2.0": "Apache-2.0",
         "apache license 2.0": "Apache-2.0", "apache license, version 2.0": "Apache-2.0",
         "apache software license": "Apache-2.0", "apache": "Apache-2.0", "bsd": "BSD", "bsd license": "BSD",
         "isc": "ISC", "isc license (iscl)": "ISC", "python software foundation license": "PSF-2.0",
         "psf": "PSF-2.0", "mozilla public license 2.0 (mpl 2.0)": "MPL-2.0"}
_LICENSE_TEXTS = [  # (phrase in a licence file, SPDX id), first match wins
    ("apache license", "Apache-2.0"), ("permission is hereby granted, free of charge", "MIT"),
    ("gnu lesser general public license", "LGPL"), ("gnu general public license", "GPL"),
    ("mozilla public license", "MPL-2.0"), ("python software foundation", "PSF-2.0"),
    ("neither the name", "BSD-3-Clause"), ("redistribution and use in source and binary forms", "BSD-2-Clause"),
    ("permission to use, copy, modify, and/or distribute", "ISC"),
]


def license_of(snapshot: Path) -> str:
    """The licence the source declares (PKG-INFO, pyproject, setup.cfg, classifiers), else the
    one its LICENSE/COPYING file holds, else "unknown"."""
    files: dict[str, str] = {}
    with tarfile.open(snapshot) as tf:
        for member in tf.getmembers():
            name = member.name.removeprefix("./")
            if member.isfile() and "/" not in name and re.match(
                    r"(PKG-INFO|pyproject\.toml|setup\.cfg|(LICEN[CS]E|COPYING)[\w.-]*)$", name, re.IGNORECASE):
                files[name] = tf.extractfile(member).read(200_000).decode("utf-8", "replace")
    declared = []
    meta = files.get("PKG-INFO", "").split("\n\n", 1)[0]
    declared += re.findall(r"^License-Expression:\s*(.+)$", meta, re.MULTILINE)
    try:
        lic = tomllib.loads(files.get("pyproject.toml", "")).get("project", {}).get("license")
    except tomllib.TOMLDecodeError:
        lic = None
    declared += [lic] if isinstance(lic, str) else [lic.get("text", "")] if isinstance(lic, dict) else []
    declared += re.findall(r"^license\s*=\s*(.+)$", files.get("setup.cfg", ""), re.MULTILINE)
    declared += re.findall(r"^License:\s*(.+)$", meta, re.MULTILINE)
    declared += re.findall(r"^Classifier: License :: (?:OSI Approved :: )?(.+)$", meta, re.MULTILINE)
    for value in declared:
        value = value.strip()
        if value and len(value) <= 60 and not value.lower().startswith(("copyright", "unknown", "file:")):
            return _SPDX.get(value.lower(), value)
    for name in sorted(files):
        if re.match(r"(LICEN[CS]E|COPYING)", name, re.IGNORECASE):
            text = " ".join(files[name].lower().split())
            for phrase, spdx in _LICENSE_TEXTS:
                if phrase in text:
                    return spdx
    return "unknown"
