"""The run machinery: a training run from start to stop, and the directory it lives in.

Owns: `trainer` (the `Trainer` loop: data, step, EMA, instrumentation, rules, checkpoints, signals), `step_hooks`
(what the loop adds around the method's step: timing, gradient reads, faults, trace, mask overlay), `checkpoint`,
`distributed` (DDP), `control` (live cadence changes through control.json), `rundir` (creating and resuming a run
directory), `lock` (one writer per run), `signals` (SIGTERM/SIGINT to a clean stop), `status` (the status words and
reading them back), `evaluation` (the periodic kNN/probe evaluation of a run) and `validation` (every config check
that needs the data, masks or model, run before any work starts), `branch` (a new run continuing a parent from
one of its checkpoints with config changes: `jepa rewind`).
May import: `jepa_core.common`, `config`, `method`, `data`, `metrics`, `alerts`. The workbench and the entry points
(`jepa_core.cli`, `.train`, `.check`, `.rewind`) sit above it.
"""
