"""The languages featdel reads, behind one seam (featdel.lang.base.Language).

In: a repository tree or a file path. Out: its `Language`. `LANGUAGES` is the registry (adding a
language is one package here and one entry); `detect_language` picks a tree's language from its
files, Python when nothing else claims it; `for_path` picks a file's by its name, so a strategy
handed one file knows how to parse and edit it.
"""

from __future__ import annotations

from pathlib import Path

from featdel.lang.base import Language
from featdel.lang.javascript import LANGUAGE as JAVASCRIPT
from featdel.lang.python import LANGUAGE as PYTHON

LANGUAGES: dict[str, Language] = {"python": PYTHON, "javascript": JAVASCRIPT}
DEFAULT = "python"


def detect_language(tree: Path) -> Language:
    """The first language other than the default that claims `tree`, else Python."""
    for name, lang in LANGUAGES.items():
        if name != DEFAULT and lang.detect(Path(tree)):
            return lang
    return LANGUAGES[DEFAULT]


def for_path(rel: str) -> Language | None:
    """The language of one file by its name (None for a file no language reads)."""
    for lang in LANGUAGES.values():
        if rel.endswith(lang.suffixes):
            return lang
    return None


# Names recorded in rows that one language of the registry reads.
DIALECTS = {"typescript": "javascript"}


def language(name: str) -> Language:
    """The language of a recorded name ("python", "javascript", "typescript"; empty: Python)."""
    try:
        return LANGUAGES[DIALECTS.get(name, name or DEFAULT)]
    except KeyError:
        raise ValueError(f"unknown language {name!r}; known: {', '.join(LANGUAGES)}") from None


def rebuild_env(row, backend: str) -> tuple[str, bool]:
    """`Language.rebuild_env` of the row's language: what `featdel env build` calls per env row
    (featdel.env.envbuild.build_all)."""
    return language(row.language).rebuild_env(row, backend)
