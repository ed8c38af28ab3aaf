"""The grading benchmark's predictions: cycled to N, no two share (model, instance), so that a
parallel `evaluate` never writes one log folder twice, and every kind keeps its own model name.
(The benchmark itself mines real PyPI sdists for minutes; it is run by hand, not here.)
"""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "grading.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_grading", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_predictions_cycle_without_sharing_a_log_folder():
    bench = load_bench()
    base = [(kind, iid, f"{kind}:{iid}") for iid in ("t1", "t2") for kind in ("gold", "empty", "pass-body")]
    preds = bench.build_predictions(base, 14)
    assert len(preds) == 14
    assert len({(p["model_name_or_path"], p["instance_id"]) for p in preds}) == 14
    assert [p["model_patch"] for p in preds] == [b[2] for b in base * 3][:14]
    for p in preds:
        assert p["model_name_or_path"].startswith(f"bench-{p['kind']}")
    models_of = {}
    for p in preds:
        models_of.setdefault(p["model_name_or_path"], set()).add(p["kind"])
    assert all(len(kinds) == 1 for kinds in models_of.values())
