"""How far back an alert's evidence reaches: the steps a rule read before it fired.

A rewind from an alert (`jepa rewind --alert N`) and the checkpoint the trainer keeps when an alert fires both start
from the newest checkpoint at least one window before the alert, so that the state rewound to predates everything
the rule saw going wrong. A rule's window is the longest of: its own comparison windows (`OWN_WINDOWS`: `RulesConfig`
fields in basic readings), one interval of the metric that fired (back to the reading before it: an evaluation
rule looks one evaluation back; without a known metric, the slowest the rule reads) and two basic readings (a
patience of two, at the run's cadences).
"""

from __future__ import annotations

import math

from jepa_core.config import DiagnosticsConfig, RulesConfig
from jepa_core.metrics import registry

# The RulesConfig fields (in basic readings) of each rule's own comparison windows.
OWN_WINDOWS: dict[str, tuple[str, ...]] = {
    "steady_collapse": ("steady_window_readings", "steady_late_window_readings"),
    "online_collapse": ("recent_high_readings",),
    "predictor_collapse": ("recent_high_readings",),
    "divergence": ("recent_high_readings",),
}


def _own_windows(rule: str, rules: RulesConfig, reading_steps: int) -> list[int]:
    """The rule's own windows in steps (rounded up: a window always spans the readings it names)."""
    return [math.ceil(float(getattr(rules, name)) * reading_steps) for name in OWN_WINDOWS.get(rule, ())]


def _cadence(rule: str, metric: str | None, cadences: DiagnosticsConfig) -> int:
    names = [metric] if metric in registry.read_by(rule) else registry.read_by(rule)
    keys = {registry.metric(name).cadence_key for name in names} - {None}
    return max((int(getattr(cadences, key)) for key in keys), default=1)


def rule_window_steps(rule: str, rules: RulesConfig, cadences: DiagnosticsConfig, metric: str | None = None) -> int:
    """The steps of evidence behind an alert of `rule` on `metric` (a rule this version does not know: two basic
    readings)."""
    basic = 2 * int(cadences.basic_every_steps)
    if rule not in registry.rules():
        return basic
    return max([basic, _cadence(rule, metric, cadences), *_own_windows(rule, rules, int(cadences.basic_every_steps))])


def rewind_reserve(step: int, checkpoint_steps: list[int], rules: RulesConfig,
                   cadences: DiagnosticsConfig) -> frozenset[int]:
    """The checkpoints an alert at `step` or later may rewind to: every one from the newest checkpoint at least the
    longest rule window before `step` on, or all of them while there is none that far back (an alert soon after
    could need any of them)."""
    longest = max(rule_window_steps(rule, rules, cadences) for rule in registry.rules())
    floor = rewind_step_before(step, longest, checkpoint_steps)
    return frozenset(s for s in checkpoint_steps if floor is None or s >= floor)


def rewind_step_before(alert_step: int, window: int, checkpoint_steps: list[int]) -> int | None:
    """The newest checkpoint step at least `window` steps before `alert_step`, None when there is none."""
    eligible = [s for s in checkpoint_steps if s <= alert_step - window]
    return max(eligible) if eligible else None
