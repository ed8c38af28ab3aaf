"""Summary tables and task listings (rich) that the CLI prints at the end of long commands."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table


def repo_table(records) -> None:
    table = Table(title="mined repositories")
    for col in ("repo", "status", "tests", "passed", "failed", "flaky", "suite s", "cover %", "reason"):
        table.add_column(col, overflow="fold")
    for r in records:
        colour = {"mined": "green", "rejected": "yellow", "broken": "red"}[r.status]
        table.add_row(
            r.name, f"[{colour}]{r.status}[/]", str(r.collected), str(r.passed), str(r.failed),
            str(r.flaky), f"{r.suite_seconds:.1f}", f"{r.coverage:.1f}", r.reason,
        )
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def verdict_summary(verdicts) -> None:
    """Yield per strategy: a candidate is a deletion a strategy produced, those the build check
    rolled back included; a strategy's refusals are not candidates and are counted apart. Then
    why candidates were not kept, grouped by rule code (featdel.core.records.RULES)."""
    from collections import Counter, defaultdict

    from featdel.core.records import VerdictStatus

    out = Console(width=None if sys.stdout.isatty() else 160)
    counts: dict[str, Counter] = defaultdict(Counter)
    for v in verdicts:
        counts[v.strategy][v.status] += 1
    table = Table(title="verification by strategy")
    for col in ("strategy", "verified", "rejected", "broken", "yield %", "refused by strategy"):
        table.add_column(col)
    for name, c in sorted(counts.items()):
        total = c[VerdictStatus.VERIFIED] + c[VerdictStatus.REJECTED] + c[VerdictStatus.BROKEN]
        table.add_row(name, str(c[VerdictStatus.VERIFIED]), str(c[VerdictStatus.REJECTED]),
                      str(c[VerdictStatus.BROKEN]), f"{100 * c[VerdictStatus.VERIFIED] / total:.0f}" if total else "-",
                      str(c[VerdictStatus.REFUSED]))
    out.print(table)
    reasons: dict[tuple[str, str], list] = defaultdict(list)
    for v in verdicts:
        if v.status != VerdictStatus.VERIFIED:
            reasons[(v.status, v.rule or v.stage)].append(v)
    if reasons:
        why = Table(title="why candidates were not kept (refusals are not candidates)")
        for col in ("status", "rule", "count", "strategies", "example"):
            why.add_column(col, overflow="fold")
        for (status, rule), items in sorted(reasons.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
            names = ", ".join(sorted({v.strategy for v in items}))
            why.add_row(str(status), rule, str(len(items)), names, items[0].reason[:160])
        out.print(why)


def grade_summary(results) -> None:
    """Per model: how many predictions ended in each status, and the resolved rate."""
    from featdel.grading.evaluate import summary
    from featdel.grading.grade import GradeStatus

    out = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title="evaluation")
    statuses = [s.value for s in GradeStatus]
    for col in ("model", *statuses, "total", "resolved %"):
        table.add_column(col)
    for model, row in sorted(summary(results).items()):
        table.add_row(model, *(str(row[s]) for s in statuses), str(row["total"]),
                      f"{100 * row['resolved'] / max(row['total'], 1):.1f}")
    out.print(table)


def task_list(run_dir) -> None:
    from featdel.core.shards import task_rows

    out = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"tasks in {run_dir}")
    for col in ("instance_id", "strategy", "F2P", "P2P", "deleted lines"):
        table.add_column(col)
    for row in task_rows(run_dir):
        table.add_row(row.instance_id, row.strategy, str(len(row.FAIL_TO_PASS)), str(len(row.PASS_TO_PASS)),
                      str(row.difficulty["deleted_lines"]))
    out.print(table)


def show_task(run_dir, instance_id: str) -> None:
    from rich.markdown import Markdown
    from rich.syntax import Syntax

    from featdel.core.errors import RunDirError
    from featdel.core.shards import task_rows

    rows = [r for r in task_rows(run_dir) if r.instance_id == instance_id]
    if not rows:
        raise RunDirError(f"no task {instance_id} in {run_dir}; `featdel show {run_dir}` lists them")
    row = rows[0]
    out = Console(width=None if sys.stdout.isatty() else 160)
    out.rule(f"{row.instance_id}  ({row.strategy}, {row.repo} @ {row.base_commit[:12]}, {row.language})")
    out.print(Markdown(row.problem_statement))
    out.rule("FAIL_TO_PASS")
    out.print("\n".join(row.FAIL_TO_PASS))
    out.rule(f"PASS_TO_PASS ({len(row.PASS_TO_PASS)})")
    out.rule("difficulty")
    out.print(row.difficulty)
    out.rule("deletion_patch (original -> start state)")
    out.print(Syntax(row.deletion_patch, "diff"))
