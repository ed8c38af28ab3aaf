"""The RL trainer (imported as `featdel.trainer`). Needs the `train` extra (torch).

Nothing is imported here, so `import featdel.trainer` stays free of torch. Modules:
- `model`: the MoE transformer, its presets, byte tokenizer and optimizer parameter groups;
- `parallel`: `ParallelDims`, the dense and expert meshes, `parallelize` (FSDP2);
- `context_parallel`: sequence-sharded attention by K/V all-gather;
- `newton_schulz`, `muon_plan`, `optim`: Newton-Schulz, the exchange plan, `ShardedMuon`;
- `checkpoint`: save and load through `torch.distributed.checkpoint`;
- `train`: the training loop. See docs/trainer.md.
"""
