"""Rollout speed of the pretrained model on CPU: one sequence against a batch.

In: the named model (`featdel model fetch smollm2-135m-instruct`), a prompt (a toy task's first
turn in the model's chat format, as `featdel train` frames it: 112 tokens), batch sizes,
new tokens per row, torch threads. Out: per (threads, batch) the prefill seconds, the decode
seconds and tokens per second, through the very sampler rollouts use
(`featdel.trainer.sampling.sample` on `featdel.trainer.hf.HFCausalLM`, KV cache, temperature 1,
no stop token so every row decodes the same count). Rows of a batch share the prompt, as the k
rollouts of a GRPO group do on their first turn. A baseline for later work on sampling speed.

    .venv/bin/python bench/rollout_speed.py --batch 1 4 8 --new 48 --threads 1 2 > bench/results/2026-12-02-rollout-speed.txt
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.toyenv, run as a script


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--new", type=int, default=48, help="tokens decoded per row")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--repeats", type=int, default=2, help="best of this many runs per cell")
    args = ap.parse_args(argv)
    import torch
    from transformers import AutoTokenizer

    from bench.toyenv import make_task, toy_prompt
    from featdel.trainer.hf import HFCodec, load
    from featdel.trainer.pretrained import fetch
    from featdel.trainer.sampling import sample

    path = fetch("smollm2-135m-instruct").path
    model, _ = load(path)
    model.eval()
    codec = HFCodec(AutoTokenizer.from_pretrained(path, local_files_only=True))
    prompt_ids = codec.encode(codec.frame_prompt(toy_prompt(make_task(0))))
    print(f"# rollout speed, {time.strftime('%Y-%m-%d')}: smollm2-135m-instruct float32 on CPU "
          f"({platform.processor() or platform.machine()}, torch {torch.__version__})")
    print(f"# command: .venv/bin/python bench/rollout_speed.py {' '.join(argv or sys.argv[1:])}")
    print(f"# prompt {len(prompt_ids)} tokens, {args.new} new tokens per row, best of {args.repeats}")
    print("| threads | batch | prefill s | decode s | decode tokens/s | tokens/s per row | speed-up over batch 1 |")
    print("|---|---|---|---|---|---|---|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        single = None
        for b in args.batch:
            prompt = torch.tensor([prompt_ids] * b)
            best_pre = best_dec = float("inf")
            for r in range(args.repeats):
                t0 = time.perf_counter()
                with torch.no_grad():
                    model(prompt)  # the prefill alone, timed apart
                t1 = time.perf_counter()
                sample(model, prompt, args.new, temperature=1.0, seed=r)
                t2 = time.perf_counter()
                best_pre, best_dec = min(best_pre, t1 - t0), min(best_dec, (t2 - t1) - (t1 - t0))
            rate = b * args.new / best_dec
            single = single or rate
            print(f"| {threads} | {b} | {best_pre:.2f} | {best_dec:.2f} | {rate:.1f} | {rate / b:.1f} | "
                  f"{rate / single:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
