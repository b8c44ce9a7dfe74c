"""The metric stream (design §4-§6): measuring training, writing `metrics.jsonl`, reading and following it.

Owns: `registry` (every metric's group, cadence, chart placement and the rules that read it); the maths of the §6
signals in `representation`, `masks_and_ema`, `weights_health` and `system_stats` (with `diagnostics`, what they share);
`measures` (what each step group measures) and `instrument` (which groups are due at which step, for the trainer);
`stream` (row encoding, the writer, the resume purge); `reader` (the one columnar row reader, with `line_scan` and
`line_columns`: a whole file, or a live file's appended lines); `follower` (a live file, read by its appended bytes);
`sinks` (TensorBoard and the console) and `artifacts` (PNGs with their metadata).
May import: `jepa_core.common`, `config`, `method`, `data`. Early warning, the run loop and the workbench read it.
"""
