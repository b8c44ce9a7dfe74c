"""The JEPA method itself: what a paper would describe, and nothing about runs, files or notebooks.

Owns: `model` (ViT context/target encoders and predictor), `masks` (I-JEPA block masks), `ema` (the target update),
`schedules` (lr, weight decay and momentum as pure functions of the step), `step` (one training update, the method
only), `noise_scale` (the backwards that also read the gradient noise scale), `faults` (design §8's planted failures,
through the step's hooks),
`probes` (kNN and linear-probe maths on features) and `runtime` (device, threads, autocast, compile, phase timing).
May import: `jepa_core.common`, `jepa_core.config`, torch. Everything above it (data, metrics, run) builds on it.
"""
