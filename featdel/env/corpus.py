"""Corpus manifests: TOML files listing pinned sources with optional per-repo overrides.

    [[repo]]
    source = "pypi:cachetools==5.5.0"
    extras = ["test"]            # pip extras to install with the repo
    packages = ["freezegun"]     # extra requirements for its tests
    test_args = ["tests"]        # appended to `python -m pytest`
    package_dirs = ["src/pkg"]   # the library's import roots, when detection guesses wrong
    timeout_s = 600              # suite time limit for this repo

In: a path. Out: a list of `CorpusEntry`. Unknown keys and wrong types are errors that name
the line's repo and key, so a typo never silently drops an override.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from featdel.core.errors import CorpusError
from featdel.env.recipe import Overrides


@dataclass(frozen=True, kw_only=True, slots=True)
class CorpusEntry:
    source: str
    overrides: Overrides


def load(path: Path) -> list[CorpusEntry]:
    if not path.exists():
        raise CorpusError(f"{path}: no such corpus file (see corpora/default.toml for the format)")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise CorpusError(f"{path}: not valid TOML: {exc}") from None
    repos = data.get("repo")
    if not isinstance(repos, list) or not repos:
        raise CorpusError(f"{path}: expected one or more [[repo]] tables with a `source`")
    known = {f.name: f for f in fields(Overrides)}
    entries = []
    for i, table in enumerate(repos, 1):
        source = table.get("source")
        if not isinstance(source, str) or not source:
            raise CorpusError(f"{path}: repo #{i} has no `source` string")
        kwargs = {}
        for key, value in table.items():
            if key == "source":
                continue
            if key not in known:
                raise CorpusError(f"{path}: {source}: unknown key `{key}` (known: {', '.join(known)})")
            if key == "timeout_s":
                if not isinstance(value, int | float) or value <= 0:
                    raise CorpusError(f"{path}: {source}: timeout_s must be a positive number")
                kwargs[key] = float(value)
            elif not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise CorpusError(f"{path}: {source}: `{key}` must be a list of strings")
            else:
                kwargs[key] = value
        entries.append(CorpusEntry(source=source, overrides=Overrides(**kwargs)))
    return entries


def entries(sources: list[str], corpus: Path | None = None) -> list[CorpusEntry]:
    """Corpus entries for `sources` (each with default overrides) and the manifest `corpus`;
    a one-line error when both are empty."""
    from featdel.env.recipe import Overrides

    out = [CorpusEntry(source=s, overrides=Overrides()) for s in sources]
    if corpus is not None:
        out += load(corpus)
    if not out:
        raise CorpusError("nothing to do: give SOURCE arguments or --corpus FILE")
    return out
