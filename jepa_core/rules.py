"""Early-warning rules (SPEC §7): streaming checks over metric rows that emit deduplicated alerts.

Feed rows one at a time (`RuleEngine.update`) live in training, or a whole file (`evaluate_rows`). Rows are sparse:
each rule acts only on rows that carry its metrics and counts *readings*, not steps. Every rule has a warm-up (early
readings build references but never fire), a patience (consecutive readings in the condition), per-episode dedup
(one alert when the condition starts, re-armed after `rearm_readings` clear readings) and a runbook-style message.

Defaults were chosen on the tuning split of the detection library (benchmarks/library.py: healthy runs over seeds and
settings, faults over magnitudes and onsets) and are reported on its test split by benchmarks/detection.py; every
number is a `RulesConfig` field so it can be tuned from the run config.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

from jepa_core.detectors import EpisodeGate
from jepa_core.stream import TOKEN_TO_FLOAT


__all__ = [
    "SEVERITIES",
    "RulesConfig",
    "Alert",
    "Rule",
    "RuleEngine",
    "build_rules",
    "evaluate_rows",
    "severity_rank",
]

SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")


def severity_rank(severity: str) -> int:
    if severity not in SEVERITIES:
        raise ValueError(f"unknown severity {severity!r}; expected one of {SEVERITIES}")
    return SEVERITIES.index(severity)


# Keys of rules that were redesigned or removed (fraction-of-peak thresholds; dead_dimensions, ema_schedule and
# not_learning, which no recorded case could make fire). A config that still names them, such as a run directory
# written before, loads: the values are ignored.
RETIRED_KEYS = frozenset({
    "smoothing_alpha", "variance_fraction_of_peak", "variance_rate_window_steps", "variance_rate_min_ratio",
    "variance_patience", "dead_dim_rise", "dead_dim_max_fraction", "dead_dim_patience", "rank_fraction_of_peak",
    "rank_rate_window_steps", "rank_rate_min_ratio", "rank_patience", "pooled_rank_fraction_of_peak",
    "pooled_rank_rate_min_ratio", "ema_runaway_jump_factor", "ema_runaway_window_steps",
    "ema_runaway_reference_step", "ema_runaway_growth_factor", "ema_runaway_patience", "ema_tau_decrease_tolerance",
    "false_comfort_variance_fraction", "not_learning_max_grad_norm", "not_learning_patience",
})


@dataclass
class RulesConfig:
    """Thresholds of the early-warning rules. Plain data (int/float/bool/str) so it maps onto a TOML section."""

    enabled: bool = True
    stop_on_critical: bool = False  # the trainer stops (with a checkpoint) once a critical alert fires
    # shared
    # readings before this step build no references and never fire: the first steps' transients (the features
    # reorganise while the lr warms up) taught the trends a pace and a noise that healthy runs then broke
    warmup_steps: int = 60
    min_readings: int = 3  # history-based rules need this many post-warm-up readings before judging
    rearm_readings: int = 5  # a rule fires again only after this many consecutive clear readings
    # mask_leak / target_gradients: critical at the first reading
    mask_leak_max_overlap: float = 0.0  # mask/overlap_fraction above this is a leak
    target_grad_max_params: float = 0.0  # ema/target_grad_params above this means the target trains
    # non_finite
    non_finite_metrics: str = "loss,grad_norm"  # comma-separated metric names that must stay finite
    # Trend breaks (variance_collapse, rank_collapse, ema_runaway): each signal's log against the level and slope it
    # kept itself (Holt smoothing per step), the shortfall in units of its own noise, summed by a one-sided CUSUM
    # (detectors.TrendBreak). A healthy run's drift, at the pace it keeps, adds about nothing; a fall faster than
    # that, held for several readings, adds up. Chosen on the tuning split of the detection library
    # (benchmarks/detection.py: healthy runs of three settings and five seeds, faults over magnitudes and onsets).
    trend_level_steps: float = 20.0  # memory of the level, in steps
    trend_slope_steps: float = 50.0  # memory of the slope, in steps (100 was slow to learn a healthy fall's pace)
    trend_drift: float = 2.0  # CUSUM allowance per reading, in noise scales
    trend_clip: float = 6.0  # most one reading adds, in noise scales (minus the drift): one outlier never fires alone
    trend_min_scale: float = 0.01  # floor of the noise scale (a 1% move)
    # The noise scale is the running mean of |shortfall| over the first readings, then an EWMA this slow: a fast
    # one (0.1) grew with a collapse itself and hid it (a 30% fall over 150 steps scored 5.4, not 18.6).
    trend_scale_alpha: float = 0.02
    variance_break: float = 10.0  # CUSUM level for target/std_mean and target/std_l2n
    fixed_batch_variance_break: float = 4.0  # ... for target/fixed_batch_std_mean (healthy runs stayed below 1.3)
    variance_abs_floor: float = 1e-6  # at or below this the features are constant, whatever the history (critical)
    rank_break: float = 8.0  # ... for target/token_effective_rank
    pooled_rank_break: float = 12.0  # ... for target/effective_rank (noisier: RankMe of one batch of pooled features)
    # ema_stalled: ema/relative_param_l2 stuck at exactly 0 (target copies online), or target statistics exactly
    # frozen while ema/param_l2 keeps changing (target never updated)
    ema_stalled_warmup_steps: int = 1  # at step 0 the target is a copy of the online encoder by construction
    ema_stalled_max_distance: float = 0.0
    ema_stalled_patience: int = 1  # a distance of exactly 0 after step 0 is conclusive at once
    # statistics of the target on a FIXED probe batch (param-distance cadence): bit-identical iff never updated
    ema_frozen_metrics: str = "target/fixed_batch_std_mean,target/fixed_batch_norm_mean"
    ema_frozen_patience: int = 3
    ema_frozen_rel_tolerance: float = 0.0  # a relative change up to this between readings counts as "unchanged"
    # ema_runaway: ema/relative_param_l2 climbing faster than its own trend, or beyond the weights' own norm
    ema_runaway_break: float = 8.0
    ema_runaway_max_distance: float = 1.0
    # false_comfort: variance and rank collapsing at once (both trend rules in their condition) while the prediction
    # still matches the target
    false_comfort_cosine: float = 0.5
    false_comfort_patience: int = 1
    # divergence: one-sided CUSUM on log grad_norm against a robust running baseline, and loss z-score spikes
    divergence_warmup_steps: int = 50  # lr warm-up makes grad_norm climb on healthy runs
    divergence_baseline_alpha: float = 0.2  # per-reading weight of the robust baseline (log grad_norm and loss)
    divergence_scale_alpha: float = 0.05  # slower: a noise scale needs more readings than a centre
    divergence_min_log_scale: float = 0.1  # floor of the log-grad-norm noise scale (10% moves are "one scale")
    divergence_cusum_drift: float = 1.0  # allowance per reading, in scales
    divergence_cusum_threshold: float = 10.0  # alarm level, in scales
    divergence_suspect_level: float = 8.0  # above this CUSUM level the baseline learns 4x slower (no absorbing)
    divergence_cusum_clip: float = 5.0  # most one reading can add: one spike adds <= clip - drift < threshold
    divergence_grad_spike_factor: float = 10.0  # one grad_norm reading this many times its running level
    divergence_loss_z: float = 6.0
    divergence_loss_min_rel_scale: float = 0.02  # loss scale floor, relative to the baseline loss
    divergence_loss_patience: int = 2  # a loss spike must persist this many readings (a lone noisy batch is not one)
    def validate(self) -> RulesConfig:
        """Raise ValueError naming `rules.<key>` for a value no rule can use; returns self."""
        for f in fields(self):
            key, value, default = f"rules.{f.name}", getattr(self, f.name), f.default
            if type(value) is not type(default) and not (type(default) is float and type(value) is int):
                raise ValueError(f"{key}: expected {type(default).__name__}, got {value!r}")
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{key}: must be finite, got {value!r}")
            if isinstance(value, bool) or isinstance(value, str):
                continue
            if f.name.endswith(("_patience", "_readings")) and value < 1:
                raise ValueError(f"{key}: must be at least 1, got {value}")
            if f.name.endswith("_alpha") and not 0 < value <= 1:
                raise ValueError(f"{key}: must be in (0, 1], got {value}")
            if f.name in ("trend_level_steps", "trend_slope_steps") and value <= 0:
                raise ValueError(f"{key}: must be positive, got {value}")
            if value < 0:
                raise ValueError(f"{key}: must be >= 0, got {value}")
        for name in ("non_finite_metrics", "ema_frozen_metrics"):
            if not _split_names(getattr(self, name)):
                raise ValueError(f"rules.{name}: needs at least one metric name, got {getattr(self, name)!r}")
        return self


@dataclass(frozen=True)
class Alert:
    step: int
    rule: str
    severity: str
    metric: str
    value: float
    message: str

    def to_row(self) -> dict:
        return {
            "step": self.step,
            "event": "alert",
            "rule": self.rule,
            "severity": self.severity,
            "metric": self.metric,
            "value": self.value,
            "message": self.message,
        }


@runtime_checkable
class Rule(Protocol):
    name: str

    def update(self, row: dict) -> list[Alert]: ...


def _number(row: dict, key: str) -> float | None:
    """The metric as a float, or None when absent or not numeric (strings for non-finite floats are accepted)."""
    value = row.get(key)
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return TOKEN_TO_FLOAT.get(value)
    return None


def _split_names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _fmt(x: float) -> str:
    return f"{x:.4g}"


class _RuleBase:
    """Shared plumbing: one episode gate per rule, alert construction."""

    name = ""
    watches: frozenset[str] = frozenset()  # metric keys this rule reads: the engine skips rows without any

    def __init__(self, cfg: RulesConfig) -> None:
        self.cfg = cfg
        self.gate = EpisodeGate(rearm=cfg.rearm_readings)

    def _alert(self, step: int, severity: str, metric: str, value: float, message: str) -> Alert:
        return Alert(step=step, rule=self.name, severity=severity, metric=metric, value=value, message=message)

    def _settled_reading(self, row: dict, metric: str) -> float | None:
        """The row's finite value of `metric` once warm-up is over; None otherwise (nothing to judge yet)."""
        value = _number(row, metric)
        if value is None or not math.isfinite(value) or row["step"] < self.cfg.warmup_steps:
            return None
        return value


def build_rules(cfg: RulesConfig) -> list[Rule]:
    """One instance of every §7 rule (fresh state: use one set per stream); the classes live in rule_set.py."""
    from jepa_core.rule_set import build_rules as build  # imported late: rule_set builds on this module's types

    return build(cfg)


class RuleEngine:
    """Runs every enabled rule over a stream of metric rows and remembers what fired."""

    def __init__(self, cfg: RulesConfig | None = None) -> None:
        self.cfg = (cfg if cfg is not None else RulesConfig()).validate()
        self.rules: list[Rule] = build_rules(self.cfg) if self.cfg.enabled else []
        self.alerts: list[Alert] = []
        self._worst = -1

    def update(self, row: dict) -> list[Alert]:
        if not isinstance(row, dict):
            raise TypeError(f"metric row must be a dict, got {type(row).__name__}")
        if "event" in row:  # alerts and other events are not metrics
            return []
        step = row.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValueError(f"metric row needs an integer 'step', got {step!r} in {sorted(row)[:8]}")
        fired: list[Alert] = []
        for rule in self.rules:
            watched = getattr(rule, "watches", None)  # optional: a custom Rule without it sees every row
            if watched and watched.isdisjoint(row):
                continue
            fired.extend(rule.update(row))
        for alert in fired:
            self._worst = max(self._worst, severity_rank(alert.severity))
        self.alerts.extend(fired)
        return fired

    def run(self, rows: Iterable[dict]) -> list[Alert]:
        fired: list[Alert] = []
        for row in rows:
            fired.extend(self.update(row))
        return fired

    @property
    def worst_severity(self) -> str | None:
        return SEVERITIES[self._worst] if self._worst >= 0 else None

    @property
    def should_stop(self) -> bool:
        """True once a critical alert fired and the config asks training to stop on it."""
        return self.cfg.stop_on_critical and self.worst_severity == "critical"


def evaluate_rows(rows: Iterable[dict], cfg: RulesConfig | None = None) -> list[Alert]:
    """Every alert a fresh engine raises over `rows` (e.g. `jepa_core.stream.iter_rows(path)`)."""
    return RuleEngine(cfg).run(rows)
