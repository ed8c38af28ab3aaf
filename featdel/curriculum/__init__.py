"""The curriculum: how a learner does on the tasks, and what to train on or generate next.

- `store`: graded attempts in an embedded DuckDB file (default RUN_DIR/curriculum.duckdb),
  safe for several writing processes.
- `posterior`: a Beta posterior of each task's pass rate, and summaries per strategy, repo and
  difficulty bucket.
- `sampler`: instance ids weighted by learnability p(1-p), unseen tasks explored, settled tasks
  retired.
- `model`: a logistic difficulty model over the tasks' difficulty features, with calibration.
- `steer`: per candidate, the knobs whose predicted pass rate is nearest a target.
- `generate`: the delete stage of `featdel run --target-pass-rate`, built on `steer`.
- `simulate`: a learner of known, growing skill, to show all of the above working.
- `report`, `cli`: what `featdel curriculum record/stats/sample` print and parse.
"""
