"""Every rule code the code writes on a verdict is one of `RULES`, and the docs list them all.

Rule codes are what summaries and queries group by, so a code spelled once in a gate and never
declared would fall out of every table: the AST of featdel/ is read for each `Rejected(CODE, ...)`,
`Verdict(rule=CODE)` and `return CODE, reason` of the build check.
"""

from __future__ import annotations

import ast
from pathlib import Path

from featdel.core.records import RULES, VerdictStatus

ROOT = Path(__file__).resolve().parents[1]


def written_codes() -> dict[str, str]:
    found = {}
    for path in (ROOT / "featdel").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            values = []
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name == "Rejected" and node.args:
                    values.append(node.args[0])
                if name == "Verdict":
                    values += [k.value for k in node.keywords if k.arg == "rule"]
            elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and node.value.elts:
                first = node.value.elts[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("build."):
                    values.append(first)
            for v in values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    found[v.value] = f"{path.relative_to(ROOT)}:{v.lineno}"
    return found


def test_every_written_rule_code_is_declared():
    codes = written_codes()
    assert len(codes) >= 15, codes  # the scan sees the gates
    unknown = {c: where for c, where in codes.items() if c not in RULES}
    assert not unknown, f"rule codes not in featdel.core.records.RULES: {unknown}"


def test_every_declared_rule_is_documented():
    text = (ROOT / "docs" / "verification.md").read_text()
    missing = [c for c in RULES if f"`{c}`" not in text]
    assert not missing, f"docs/verification.md does not list {missing}"


def test_refused_is_its_own_status():
    assert VerdictStatus.REFUSED == "refused" and VerdictStatus.REFUSED != VerdictStatus.REJECTED
