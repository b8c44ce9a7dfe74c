"""The one registry of the metrics a run logs (design §6): for every name, the group that logs it (and so its cadence
key), where the workbench shows it, and which §7 rules read it.

Plain data and no torch, so the workbench and the tests read it without loading the method. What reads it:

- `jepa_core.metrics.instrument` takes its groups' names and cadence keys from `STEP_GROUPS` (the measuring
  functions stay there: a step group here without one there fails at import);
- `jepa_core.workbench.charts` draws its §6 group panels, its early-warning panels, the evaluation and the throughput
  charts from `shown_in`; `jepa_core.workbench.doctor` its key-metric table;
- the rules of `jepa_core.alerts.rules` keep their metric names next to the thresholds they go with (two lists are
  config values: `rules.non_finite_metrics`, `rules.ema_frozen_metrics`), so `read_by` records what the rules read
  under the default config, and tests/test_registry.py checks it against every rule's `watches`.

Cadence keys: `jepa_core.config.CADENCE_KEYS` (the `*_every_steps` fields of `DiagnosticsConfig`) is the one list. The
config sits below this layer and cannot read it, so the registry checks its groups against that list at import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from jepa_core.config import CADENCE_KEYS

__all__ = ["CADENCE_KEYS", "GROUPS", "METRICS", "STEP_GROUPS", "VIEWS", "Group", "Metric", "Placement", "group",
           "in_group", "metric", "panels", "read_by", "rules", "shown_in"]

# Who measures a group, and so when its rows are written.
STEP_HOOK = "Instrumentation.after_step"  # at the group's cadence, after a training step
EVALUATION = "run.evaluation"  # kNN and linear probe at the evaluation cadence (and at step 0: the baseline)
RUN_START = "Instrumentation.start_metrics"  # once, at step 0


@dataclass(frozen=True)
class Group:
    """Metrics measured together, at one cadence."""

    name: str
    cadence_key: str | None  # the `diagnostics.<key>` that sets its cadence; None: once per run
    measured_by: str  # STEP_HOOK, EVALUATION or RUN_START


GROUPS: tuple[Group, ...] = (
    Group("basic", "basic_every_steps", STEP_HOOK),
    Group("representation", "representation_every_steps", STEP_HOOK),
    Group("fixed_batch", "fixed_batch_every_steps", STEP_HOOK),
    Group("covariance", "covariance_every_steps", STEP_HOOK),
    Group("param_distance", "param_distance_every_steps", STEP_HOOK),
    Group("mask_check", "mask_check_every_steps", STEP_HOOK),
    Group("weights_health", "weights_health_every_steps", STEP_HOOK),
    Group("evaluation", "eval_every_steps", EVALUATION),
    Group("run_facts", None, RUN_START),
)
STEP_GROUPS: tuple[Group, ...] = tuple(g for g in GROUPS if g.measured_by == STEP_HOOK)

# Where the workbench shows a metric: the §6 small multiples of charts.group_chart (one panel per display group), the
# early-warning rows of charts.early_warning_charts (one panel per signal), charts.eval_chart, charts.throughput_chart,
# and the key-metric table of `jepa doctor`.
VIEWS: tuple[str, ...] = ("group", "signal", "eval", "throughput", "doctor")


@dataclass(frozen=True)
class Placement:
    """One place a metric is shown: a view, the panel within it ('' for a one-panel view) and its position there."""

    view: str
    panel: str = ""
    position: int = 0  # metrics of a panel are drawn by position, then in registry order


@dataclass(frozen=True)
class Metric:
    name: str  # the stream key (design §5: lowercase, slash-separated)
    group: str  # the Group that logs it: its cadence is that group's
    shown: tuple[Placement, ...] = ()
    read_by: tuple[str, ...] = ()  # names of the §7 rules that read it (their `watches`, default config)
    # '' when every row its group's measurer writes carries it; else when it is left out, or who adds it instead
    when: str = ""

    @property
    def cadence_key(self) -> str | None:
        return group(self.group).cadence_key


def _m(name: str, group_name: str, *shown: Placement, read_by: tuple[str, ...] = (), when: str = "") -> Metric:
    return Metric(name, group_name, shown, read_by, when)


def _panel(display_group: str) -> Placement:
    return Placement("group", display_group)


def _signal(key: str, position: int) -> Placement:
    return Placement("signal", key, position)


def _doctor(position: int) -> Placement:
    return Placement("doctor", "", position)


# The display groups of design §6's table.
_OPT, _PRED, _TARGET, _PRED_REP, _MASK, _EMA, _HEALTH, _RUNTIME, _EVAL = (
    "optimisation", "prediction", "target representation", "prediction representation", "mask", "EMA",
    "optimisation health", "runtime", "evaluation")
_TRAINER = "added by the trainer to each basic row, after the instrumentation"
_VARIANCE = ("variance_collapse", "false_comfort")  # false_comfort reads the variance and rank rules' verdicts
_RANK = ("rank_collapse", "false_comfort")

# In design §6 order: a display group's panels are drawn in this order.
METRICS: tuple[Metric, ...] = (
    _m("loss", "basic", _panel(_OPT), _signal("divergence", 0), _doctor(0),
       read_by=("non_finite", "divergence", "eval_regression")),
    _m("lr", "basic", _panel(_OPT)),
    _m("wd", "basic", _panel(_OPT)),
    _m("grad_norm", "basic", _panel(_OPT), _signal("divergence", 1), _doctor(1),
       read_by=("non_finite", "divergence")),
    _m("global_batch_size", "basic", _panel(_OPT)),
    _m("epoch", "basic", _panel(_OPT), when=_TRAINER),
    _m("pred_target/mse", "representation", _panel(_PRED)),
    _m("pred_target/mae", "representation", _panel(_PRED)),
    _m("pred_target/cosine", "representation", _panel(_PRED), _signal("variance", 2), _doctor(7),
       read_by=("false_comfort", "divergence")),
    _m("target/norm_mean", "representation", _panel(_TARGET)),
    _m("target/norm_std", "representation", _panel(_TARGET)),
    _m("target/std_mean", "representation", _panel(_TARGET), _signal("variance", 0), _doctor(2),
       read_by=(*_VARIANCE, "steady_collapse", "divergence")),
    _m("target/std_min", "representation", _panel(_TARGET)),
    _m("target/std_l2n", "representation", _panel(_TARGET), _signal("variance", 1), _doctor(3), read_by=_VARIANCE),
    _m("target/dead_dim_fraction", "representation", _panel(_TARGET), _doctor(6)),
    _m("target/effective_rank", "covariance", _panel(_TARGET), _signal("rank", 0), _doctor(4), read_by=_RANK),
    _m("target/token_effective_rank", "covariance", _panel(_TARGET), _signal("rank", 1), _doctor(5), read_by=_RANK),
    _m("target/cov_offdiag_abs_mean", "covariance", _panel(_TARGET)),
    # The target on one fixed probe batch: read by the rules (no sampling noise; a never-updated target gives
    # identical values), not charted.
    _m("target/fixed_batch_std_mean", "fixed_batch",
       read_by=("variance_collapse", "steady_collapse", "ema_stalled", "false_comfort", "online_collapse")),
    _m("target/fixed_batch_norm_mean", "fixed_batch", read_by=("ema_stalled",)),
    # The online (context) encoder's spread on the same probe batch. A collapse starts in the online encoder and
    # reaches the target only through the EMA, so the online spread falls first and furthest (research/
    # online_spread.py).
    _m("online/fixed_batch_std_mean", "fixed_batch", _panel(_EMA), _signal("variance", 3),
       read_by=("online_collapse",)),
    _m("pred/norm_mean", "representation", _panel(_PRED_REP)),
    # Its spread over the batch: a predictor that stops reading its context answers every target alike.
    _m("pred/std_mean", "representation", _panel(_PRED_REP), _signal("variance", 4), read_by=("predictor_collapse",)),
    _m("pred/dead_dim_fraction", "representation", _panel(_PRED_REP)),
    _m("pred/effective_rank", "covariance", _panel(_PRED_REP)),
    _m("mask/context_count", "mask_check", _panel(_MASK)),
    _m("mask/target_count", "mask_check", _panel(_MASK)),
    _m("mask/context_ratio", "mask_check", _panel(_MASK)),
    _m("mask/target_ratio", "mask_check", _panel(_MASK)),
    _m("mask/overlap_fraction", "mask_check", _panel(_MASK), _signal("leak", 0), _doctor(10), read_by=("mask_leak",)),
    _m("ema_tau", "basic", _panel(_EMA), _signal("ema", 1), _doctor(9), read_by=("ema_stalled",)),
    _m("ema/param_l2", "param_distance", _panel(_EMA), read_by=("ema_stalled",)),
    _m("ema/relative_param_l2", "param_distance", _panel(_EMA), _signal("ema", 0), _doctor(8),
       read_by=("ema_stalled", "ema_runaway")),
    # The target's features against the online encoder's on the same probe batch: exactly 0 when the target is a
    # copy of the online encoder; it keeps changing while the online encoder trains, whatever the target does.
    _m("ema/fixed_batch_distance", "fixed_batch", _panel(_EMA), read_by=("ema_stalled", "ema_runaway")),
    _m("ema/target_grad_params", "mask_check", _panel(_EMA), _signal("leak", 1), read_by=("target_gradients",)),
    _m("health/grad_cosine_prev", "weights_health", _panel(_HEALTH),
       when="when the previous step's gradient was kept (not at the first step)"),
    _m("health/gns", "weights_health", _panel(_HEALTH),
       when="once the noise scale's smoothed estimates are positive (micro-batches at this cadence only)"),
    _m("health/stable_rank_min", "weights_health", _panel(_HEALTH)),
    _m("health/weight_drift_max", "weights_health", _panel(_HEALTH)),
    _m("health/update_ratio", "weights_health", _panel(_HEALTH), read_by=("divergence",)),
    _m("time/step_seconds", "basic", _panel(_RUNTIME), Placement("throughput", "", 1)),
    _m("time/data_seconds", "basic", _panel(_RUNTIME), Placement("throughput", "", 2)),
    _m("time/samples_per_second", "basic", _panel(_RUNTIME), Placement("throughput", "", 0),
       when="when the step took measurable time"),
    _m("time/eta_seconds", "basic", _panel(_RUNTIME)),
    _m("memory/cuda_allocated_gb", "basic", _panel(_RUNTIME), when="on CUDA only"),
    _m("memory/cuda_reserved_gb", "basic", _panel(_RUNTIME), when="on CUDA only"),
    _m("memory/cuda_peak_gb", "basic", _panel(_RUNTIME), when="on CUDA only"),
    _m("system/cpu_percent", "basic", _panel(_RUNTIME)),
    _m("system/ram_gb", "basic", _panel(_RUNTIME)),
    # Phase timings of one step (jepa_core.method.runtime.PHASES) and the streamed-data skip count: not charted.
    _m("time/forward_backward_seconds", "basic", when=_TRAINER),
    _m("time/optimizer_seconds", "basic", when=_TRAINER),
    _m("time/ema_seconds", "basic", when=_TRAINER),
    _m("time/diagnostics_seconds", "basic", when=_TRAINER),
    _m("data/skipped_images", "basic", when="for streamed datasets only; added by the trainer"),
    _m("knn/accuracy", "evaluation", _panel(_EVAL), Placement("eval", "", 0), _signal("eval", 0),
       read_by=("eval_regression",)),
    _m("linear_probe/train_acc", "evaluation", _panel(_EVAL), Placement("eval", "", 1)),
    _m("linear_probe/val_acc", "evaluation", _panel(_EVAL), Placement("eval", "", 2), _signal("eval", 1),
       read_by=("eval_regression",)),
    # LiDAR (Thilak et al. 2023), label-free: held-out images as classes, their masked views as samples
    _m("target/lidar", "evaluation", _signal("rank", 2), when="when eval.lidar_images > 0"),
    _m("target/lidar_noise", "evaluation", when="at the step-0 evaluation, when eval.lidar_images and noise_splits > 0"),
    # The noise of one evaluation, measured at the step-0 (random-init) evaluation over eval.noise_splits halvings.
    _m("knn/accuracy_noise", "evaluation", read_by=("eval_regression",),
       when="at the step-0 evaluation, when eval.noise_splits > 0"),
    _m("linear_probe/val_acc_noise", "evaluation", read_by=("eval_regression",),
       when="at the step-0 evaluation, when eval.noise_splits > 0"),
    _m("params/total", "run_facts"),
    _m("params/trainable", "run_facts"),
    _m("params/encoder", "run_facts"),
    _m("params/predictor", "run_facts"),
)

_BY_NAME: Mapping[str, Metric] = MappingProxyType({m.name: m for m in METRICS})
_GROUP_BY_NAME: Mapping[str, Group] = MappingProxyType({g.name: g for g in GROUPS})
_NAME = re.compile(r"[a-z0-9_]+(/[a-z0-9_]+)*")  # design §5


def metric(name: str) -> Metric:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a registered metric (jepa_core/metrics/registry.py)") from None


def group(name: str) -> Group:
    try:
        return _GROUP_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown metric group {name!r}; known: {', '.join(_GROUP_BY_NAME)}") from None


def in_group(name: str) -> tuple[Metric, ...]:
    """The metrics `name` logs, in registry order."""
    group(name)
    return tuple(m for m in METRICS if m.group == name)


def _placed(view: str) -> list[tuple[Placement, int, Metric]]:
    if view not in VIEWS:
        raise KeyError(f"unknown view {view!r}; known: {', '.join(VIEWS)}")
    return [(p, i, m) for i, m in enumerate(METRICS) for p in m.shown if p.view == view]


def shown_in(view: str, panel: str = "") -> tuple[str, ...]:
    """The metrics a panel of a view shows, in the order it draws them."""
    found = sorted((p.position, i, m.name) for p, i, m in _placed(view) if p.panel == panel)
    return tuple(name for _, _, name in found)


def panels(view: str) -> tuple[str, ...]:
    """A view's panels, in registry order of their first metric."""
    return tuple(dict.fromkeys(p.panel for p, _, _ in _placed(view)))


def read_by(rule: str) -> frozenset[str]:
    """The metrics the registry says `rule` reads."""
    return frozenset(m.name for m in METRICS if rule in m.read_by)


def rules() -> tuple[str, ...]:
    """Every rule that reads a registered metric, in registry order of first mention."""
    return tuple(dict.fromkeys(r for m in METRICS for r in m.read_by))


def _check() -> None:
    """The registry's own consistency, at import: a mistake here would otherwise surface as a silent gap (a metric
    never charted, a cadence slider that moves nothing)."""
    if len(_BY_NAME) != len(METRICS):
        raise ValueError("metric registry: a metric name is listed twice")
    for m in METRICS:
        if not _NAME.fullmatch(m.name):
            raise ValueError(f"metric registry: {m.name!r} is not a lowercase, slash-separated name")
        group(m.group)
        for p in m.shown:
            if p.view not in VIEWS or (p.view in ("group", "signal")) != bool(p.panel):
                raise ValueError(f"metric registry: {m.name!r} has a bad placement {p}")
    keys = [g.cadence_key for g in GROUPS if g.cadence_key is not None]
    if sorted(keys) != sorted(CADENCE_KEYS):
        raise ValueError(f"metric registry: the groups' cadence keys {sorted(keys)} are not "
                         f"jepa_core.config.CADENCE_KEYS {sorted(CADENCE_KEYS)}, one group each")


_check()
