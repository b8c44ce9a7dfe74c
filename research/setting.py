"""A setting of the detection library (design §7, §8): a config a user might run, on top of the tiny preset, with the
fault onsets, the window a fault run trains past its onset and, for the newer ones, fault magnitudes of its own. The
settings themselves are library_settings.py and library_settings_recent.py.
"""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class Setting:
    name: str
    overrides: tuple[str, ...]  # on top of the tiny preset
    steps: int
    onsets: tuple[int, ...]  # fault onsets (early, middle, late), each a checkpoint of the healthy run; () none
    window: int | None  # steps a fault run trains past its onset (None: to the end of the schedule)
    about: str
    round: int = 1  # the round that introduced the setting (all its seeds 0-4 belong to it)
    # Magnitudes of its own for some faults (the others keep cases.FAULTS'): a test setting can ask for cells that were
    # never tuned on, between and beyond every earlier grid's. Its lr x1e6 reaches NaN/Inf, a real divergence, except
    # where a comment says otherwise.
    magnitudes: tuple[tuple[str, tuple], ...] = ()


def cadences(basic: int, fixed: int, slow: int, evaluation: int, checkpoint: int) -> tuple[str, ...]:
    """A setting's reading cadences: the per-batch signals and the mask check every `basic` steps, the fixed probe
    batch every `fixed`, the covariance, parameter distance and weights' health every `slow`, the evaluation every
    `evaluation` and a checkpoint (a fault onset to branch from) every `checkpoint`."""
    return (f"diagnostics.basic_every_steps={basic}", f"diagnostics.representation_every_steps={basic}",
            f"diagnostics.mask_check_every_steps={basic}", f"diagnostics.fixed_batch_every_steps={fixed}",
            f"diagnostics.covariance_every_steps={slow}", f"diagnostics.param_distance_every_steps={slow}",
            f"diagnostics.weights_health_every_steps={slow}", f"diagnostics.eval_every_steps={evaluation}",
            f"logging.checkpoint_every_steps={checkpoint}")
