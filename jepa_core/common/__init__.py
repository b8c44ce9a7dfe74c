"""Small helpers every layer shares, with no knowledge of JEPA: writing a file atomically, terminal-safe text and
durations, quiet exit on a closed pipe.

Owns: `atomic` (write-then-rename with fsync, temp files cleaned up) and `console` (terminal text, one duration
formatter, `exit_quietly_on_broken_pipe`).
May import: the standard library only; every other layer may import this one.
"""
