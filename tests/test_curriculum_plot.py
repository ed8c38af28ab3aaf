"""`featdel curriculum stats --plot` draws a real PNG (pass-rate distribution, predicted against
observed) when the `plot` extra is installed, and says how to get it when it is not."""

from __future__ import annotations

import pytest

from featdel.core.errors import FeatdelError
from featdel.curriculum.posterior import TaskStats, plot


def _stats():
    return [TaskStats(instance_id=f"t{i}", repo="r", strategy="body", difficulty={}, successes=float(i % 4),
                      trials=4) for i in range(8)]


def test_plot_writes_a_png(tmp_path):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(FeatdelError, match=r"pip install 'featdel\[plot\]'"):
            plot(_stats(), None, tmp_path / "p.png")
        return
    out = plot(_stats(), {f"t{i}": 0.1 * i for i in range(8)}, tmp_path / "p.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
