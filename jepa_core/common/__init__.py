"""Small helpers every layer shares, with no knowledge of JEPA: writing a file atomically, terminal-safe text and
durations, quiet exit on a closed pipe, seed derivation.

Owns: `atomic` (write-then-rename with fsync, temp files cleaned up), `console` (terminal text, the one duration
formatter, `exit_quietly_on_broken_pipe`) and `seeds` (every seed a run derives from `runtime.seed`).
May import: the standard library, numpy and torch (seeds); every other layer may import this one.
"""
