"""GPU benchmark: bf16 Newton-Schulz TFLOP/s of the batched expert path, and the optimizer step
of the largest preset that fits on one GPU, both against the chip's peak.

In: nothing but flags; needs one CUDA device (it refuses, exit status 2, without one).
Out: markdown lines stamped with the UTC date and the chip's name, ready to paste into
docs/trainer.md, and optionally a JSON file.

Two measurements, timed with CUDA events after warm-up:
- Newton-Schulz on packed same-shape expert matrices in bf16 (one batched matmul per
  product), from a Kimi-K2 expert (2048 x 7168) down to small experts, as TFLOP/s and the
  fraction of the chip's dense bf16 peak.
- `ShardedMuon.step()` on the largest preset (largest first, on out-of-memory the next) with
  random full-rank gradients, in one process: all Muon matrices per head and per expert, bf16
  Newton-Schulz, fp32 weights and momentum; reported with its Newton-Schulz FLOPs, the
  implied TFLOP/s, and torch's fused AdamW on the same weights for a ratio.

    python bench/trainer_muon_gpu.py [--peak-tflops 989] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone

# Dense bf16 tensor-core peak (TFLOP/s, no sparsity) by substring of the device name.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100 PCIe": 756.0, "H100": 989.0, "GH200": 989.0, "B200": 2250.0,
                    "A100": 312.0, "L40S": 362.0, "A10G": 70.0, "L4": 121.0}
NS_SHAPES = [(16, 2048, 7168), (64, 1024, 2048), (256, 512, 1024), (512, 256, 512)]


def _time(fn, warmup: int, iters: int, device: str = "cuda") -> float:
    import time

    import torch

    for _ in range(warmup):
        fn()
    if device == "cpu":  # only so the code path can be exercised without a GPU
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) / iters
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def bench_newton_schulz(peak: float, iters: int, shapes=NS_SHAPES, device: str = "cuda"):
    import torch

    from featdel.trainer.newton_schulz import newton_schulz, newton_schulz_flops

    rows = []
    for n, r, c in shapes:
        x = torch.randn(n, r, c, device=device, dtype=torch.bfloat16)
        s = _time(lambda: newton_schulz(x, 5, dtype=torch.bfloat16), 2, iters, device)
        tflops = n * newton_schulz_flops(r, c) / s / 1e12
        rows.append({"shape": [n, r, c], "seconds": s, "tflops": tflops, "of_peak": tflops / peak})
        del x
    return rows


def bench_step(peak: float, iters: int, presets, device: str = "cuda"):
    import torch

    from featdel.trainer.model import PRESETS, Transformer, optimizer_groups
    from featdel.trainer.muon_plan import matrix_shape
    from featdel.trainer.newton_schulz import newton_schulz_flops
    from featdel.trainer.optim import ShardedMuon

    for name in presets:
        model = opt = None
        try:
            with torch.device(device):
                torch.manual_seed(0)
                model = Transformer(PRESETS[name])
            for p in model.parameters():
                p.grad = torch.randn_like(p)
            opt = ShardedMuon(optimizer_groups(model))
            s = _time(opt.step, 1, iters, device)
        except torch.OutOfMemoryError:
            del model, opt
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            continue
        flops = sum(matrix_shape(tuple(p.shape), g["granularity"], g["head_dim"])[0]
                    * newton_schulz_flops(*matrix_shape(tuple(p.shape), g["granularity"], g["head_dim"])[1:])
                    for g in opt.param_groups if g["algorithm"] == "muon" for p in g["params"])
        del opt
        if device == "cuda":
            torch.cuda.empty_cache()
        try:  # AdamW's two states may not fit beside the weights of the largest Muon model
            adamw = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
            s_adamw = _time(adamw.step, 1, iters, device)
            del adamw
        except torch.OutOfMemoryError:
            s_adamw = float("nan")
        n_params = sum(p.numel() for p in model.parameters())
        return {"preset": name, "params": n_params, "seconds": s, "ns_flops": flops,
                "tflops": flops / s / 1e12, "of_peak": flops / s / 1e12 / peak, "adamw_seconds": s_adamw,
                "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else 0.0}
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peak-tflops", type=float, help="dense bf16 peak; default from the device name")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--presets", default="xl,large,medium,small,tiny", help="tried in this order")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("trainer_muon_gpu: no CUDA device here; this benchmark needs a GPU, nothing was measured",
              file=sys.stderr)
        return 2
    chip = torch.cuda.get_device_name()
    peak = args.peak_tflops or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in chip), None)
    if peak is None:
        print(f"trainer_muon_gpu: no known bf16 peak for {chip!r}; pass --peak-tflops", file=sys.stderr)
        return 2
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    ns = bench_newton_schulz(peak, args.iters)
    step = bench_step(peak, args.iters, args.presets.split(","))
    print(f"trainer_muon_gpu {date}, {chip}, peak {peak:.0f} bf16 TFLOP/s, torch {torch.__version__}")
    print("| NS5 batch [n, rows, cols] | ms | TFLOP/s | of peak |\n|---|---|---|---|")
    for r in ns:
        print(f"| {r['shape']} | {1e3 * r['seconds']:.2f} | {r['tflops']:.0f} | {100 * r['of_peak']:.0f}% |")
    if step:
        print(f"optimizer step, preset {step['preset']} ({step['params'] / 1e9:.2f} B params): "
              f"{step['seconds']:.3f} s, NS {step['ns_flops']:.3g} FLOPs = {step['tflops']:.0f} TFLOP/s "
              f"({100 * step['of_peak']:.0f}% of peak); fused AdamW {step['adamw_seconds']:.3f} s "
              f"(Muon/AdamW {step['seconds'] / step['adamw_seconds']:.1f}x); peak memory "
              f"{step['peak_memory_gib']:.0f} GiB")
    else:
        print("optimizer step: no preset fits on this device")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": date, "chip": chip, "peak_tflops": peak, "newton_schulz": ns, "step": step}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
