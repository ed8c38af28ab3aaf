"""What the curriculum commands print and return, from a run directory and an attempts file.

In: RUN_DIR (task shards) and the attempts file. Out: rich tables on stdout (`print_stats`), the
ids `featdel curriculum sample` writes (`sample_ids`), and the learner's fitted difficulty model
(`learner_model`, used by steering too).
"""

from __future__ import annotations

from pathlib import Path

from featdel.core import store
from featdel.curriculum import model, posterior, sampler


def load_stats(run: Path, db: Path, *, learner: str | None) -> list[posterior.TaskStats]:
    outcomes = store.outcomes(db, learner=learner) if Path(db).exists() else {}
    return posterior.task_stats(posterior.task_rows(run), outcomes)


def learner_model(run: Path, db: Path, *, learner: str | None, window: int | None = 5):
    """(model, calibration) fitted on the learner's attempts, or (None, None) with fewer than
    two tried tasks."""
    rows = posterior.task_rows(run)
    obs = model.observations(rows, store.by_round(db, learner=learner)) if Path(db).exists() else []
    if len({o.instance_id for o in obs}) < 2:
        return None, None
    return model.fit(obs, window=window), model.calibrate(obs, window=window)


def sample_ids(run: Path, db: Path, *, n: int, learner: str | None, band=(0.0, 1.0), seed: int = 0) -> list[str]:
    opts = sampler.SampleOptions(n=n, seed=seed, band=tuple(band))
    return sampler.sample(load_stats(run, db, learner=learner), opts)


def print_stats(run: Path, db: Path, *, learner: str | None, plot: Path | None = None, top: int = 10) -> None:
    from rich.console import Console
    from rich.table import Table

    if not Path(db).exists():
        raise store.StoreError(f"{db} does not exist: record attempts first (`featdel curriculum record`)")
    stats = load_stats(run, db, learner=learner)
    console = Console()
    for name, key in posterior.SUMMARIES.items():
        rows = posterior.summarise(stats, key)
        table = Table(title=f"by {name}")
        for col in rows[0]:
            table.add_column(col)
        for row in rows:
            table.add_row(*("-" if v is None else str(v) for v in row.values()))
        console.print(table)
    opts = sampler.SampleOptions(n=1)
    ranked = sorted(stats, key=lambda s: (-sampler.weight(s, opts), s.instance_id))[:top]
    table = Table(title=f"tasks, most learnable first (top {len(ranked)} of {len(stats)})")
    for col in ("instance_id", "attempts", "passed", "mean", "90% interval", "p(1-p)", "retired"):
        table.add_column(col)
    for s in ranked:
        lo, hi = s.interval()
        table.add_row(s.instance_id, str(s.trials), f"{s.successes:g}", f"{s.mean:.2f}", f"{lo:.2f}-{hi:.2f}",
                      f"{s.learnability():.3f}", sampler.retired(s, opts) or "-")
    console.print(table)
    retired = [sampler.retired(s, opts) for s in stats]
    console.print(f"{sum(1 for s in stats if s.trials)} of {len(stats)} tasks tried; retired: "
                  f"{retired.count('always')} always solved, {retired.count('never')} never solved")
    fitted, calib = learner_model(run, db, learner=learner)
    if calib is not None:
        how = "out of fold" if calib.out_of_fold else "in sample"
        console.print(f"difficulty model ({how}, {calib.tasks} tasks, {calib.attempts} attempts): "
                      f"Brier {calib.brier:.3f}, {calib.within:.0%} of tasks within {calib.tolerance} of observed")
    if plot is not None:
        predicted = ({s.instance_id: fitted.predict(s.difficulty, s.strategy, round=fitted.last_round) for s in stats} if fitted else None)
        console.print(f"plot in {posterior.plot(stats, predicted, plot)}")
