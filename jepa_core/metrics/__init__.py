"""The metric stream (SPEC §4-§6): measuring training, writing `metrics.jsonl`, reading and following it.

Owns: `registry` (every metric's group, cadence, chart placement and the rules that read it), `diagnostics` (the
maths of each §6 signal), `instrument` (what the trainer measures at which cadence),
`stream` (row encoding, the writer, the resume purge), `reader` (the fast columnar reader), `follower` (a live file,
read by its appended bytes), `sinks` (TensorBoard and the console) and `artifacts` (PNGs with their metadata).
May import: `jepa_core.common`, `config`, `method`, `data`. Early warning, the run loop and the workbench read it.
"""
