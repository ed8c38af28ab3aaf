"""The trainer benchmarks run: the CPU one prints its ratios, the GPU one refuses without a GPU.

Pins: `bench/trainer_muon_cpu.py` runs on real gloo ranks and reports every optimizer with a
ratio to sharded Muon and the bytes each rank sent (sharded Muon sends some, unsharded Muon
and AdamW none); `bench/trainer_muon_gpu.py` imports, and on a machine without CUDA exits with
status 2 and says that nothing was measured, instead of crashing or printing numbers, while
its measuring functions still run on CPU.
"""

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.slow
def test_cpu_benchmark_reports_ratios(tmp_path):
    out = subprocess.run([sys.executable, str(BENCH / "trainer_muon_cpu.py"), "--preset", "debug", "--world", "2",
                          "--steps", "1", "--warmup", "0", "--json", str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert set(rows) == {"sharded Muon, per head and expert", "sharded Muon, no overlap", "sharded Muon, full matrix",
                         "unsharded full-matrix Muon", "AdamW on FSDP2 shards"}
    assert rows["sharded Muon, full matrix"]["bytes_per_rank"] > 0
    assert rows["unsharded full-matrix Muon"]["bytes_per_rank"] == 0
    assert "x sharded Muon" in out.stdout and "all-gathering full fp32 momentum" in out.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="has a GPU: run the benchmark itself")
def test_gpu_benchmark_refuses_cleanly_without_a_gpu():
    out = subprocess.run([sys.executable, str(BENCH / "trainer_muon_gpu.py")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert "nothing was measured" in out.stderr and out.stdout == ""


def test_gpu_benchmark_code_paths_run_on_cpu():
    # The GPU itself was not available; this keeps its measuring code from rotting unseen.
    import importlib.util

    spec = importlib.util.spec_from_file_location("trainer_muon_gpu", BENCH / "trainer_muon_gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    ns = gpu.bench_newton_schulz(1.0, 1, shapes=[(2, 16, 32)], device="cpu")
    assert ns[0]["tflops"] > 0
    step = gpu.bench_step(1.0, 1, ["debug"], device="cpu")
    assert step["preset"] == "debug" and step["ns_flops"] > 0 and step["adamw_seconds"] > 0
