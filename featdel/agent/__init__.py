"""The agent environment: a task's start state in a sandboxed work tree, a textual tool protocol,
hints, and token-exact trajectories (issue 12, items 2 and 3).

In: tasks from the shards (`episode.load_agent_tasks`, or an `AgentTask` around a `GradeTask`)
and a `Policy`. Out: `Trajectory` records with a reward from `featdel.grading.grade`. Modules:
`protocol` (the call format and its strict parser), `workspace` (confined paths, the tools),
`hints` (the rule registry), `policy` (scripted and Transformer policies), `trajectory` (records
and JSONL), `episode` (one episode, and k rollouts in parallel). Importing this package imports
no torch; see docs/agent.md.
"""
