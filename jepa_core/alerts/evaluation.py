"""`eval_regression`: the evaluation readings, the ground truth a user trains for, judged against the run itself.

The kNN and linear-probe accuracies on held-out images say what the features are worth; every other rule watches a
proxy. A run that makes its features worse than the random-init encoder's has failed whatever its loss does: on real
handwritten digits the `tiny` preset's loss fell 52% and its prediction agreement climbed from 0.15 to 0.72 while the
probe fell from 0.596 (step 0) to 0.443, and no proxy rule spoke.

Each reading is compared with two references of the same run, in units of the noise of one evaluation:

- the random-init reading (the evaluation at step 0): one reading below it by more than `eval_regression_noise_multiple`
  noises of a difference, and the other below it too (by more than one), is **critical**: the training has made the
  representation worse than doing nothing;
- the run's best reading so far: the kNN *and* the probe both below their best by as much is a **warning**: the
  representation has started to lose what it learnt (one metric alone can drift; both together rarely do on a
  healthy run).

The noise is measured, not assumed: the step-0 evaluation scores the same features on `eval.noise_splits` other
random halvings of the held-out split and logs their spread (`<metric>_noise`). A stream without it (written before
it was logged) falls back on the binomial noise of an accuracy on the probe-val half when its size is known
(`eval_count`, a fact of the run's config), and is otherwise not judged. A difference of two readings has √2 times
the noise of one.
"""

from __future__ import annotations

import math

from jepa_core.alerts.base import Alert, RuleBase, fmt, number
from jepa_core.alerts.detectors import EpisodeGate
from jepa_core.config.rules import RulesConfig

METRICS = ("linear_probe/val_acc", "knn/accuracy")


class EvalRegressionRule(RuleBase):
    name = "eval_regression"
    watches = frozenset({*METRICS, *(f"{m}_noise" for m in METRICS), "loss"})

    def __init__(self, cfg: RulesConfig, eval_count: int | None = None) -> None:
        super().__init__(cfg)
        self.eval_count = eval_count  # images in the probe-val half, when the config tells it
        self.init: dict[str, float] = {}  # the step-0 (random-init) reading
        self.noise: dict[str, float] = {}  # one evaluation's noise, measured at step 0
        self.best: dict[str, float] = {}
        self.first: dict[str, float] = {}  # the first reading (the step-0 one, when the run evaluated at step 0)
        self.first_loss: float | None = None
        self.last_loss: float | None = None
        self.critical_gate = EpisodeGate(rearm=cfg.rearm_readings)  # a warning never holds the critical alert

    def _noise_of(self, metric: str) -> float | None:
        if metric in self.noise:
            return self.noise[metric]
        first = self.init.get(metric, self.first.get(metric))
        if self.eval_count and first is not None:  # binomial: an accuracy on eval_count images
            p = min(max(first, 0.5 / self.eval_count), 1 - 0.5 / self.eval_count)
            return math.sqrt(p * (1 - p) / self.eval_count)
        return None

    def update(self, row: dict) -> list[Alert]:
        step = row["step"]
        loss = number(row, "loss")
        if loss is not None and math.isfinite(loss):
            self.first_loss = loss if self.first_loss is None else self.first_loss
            self.last_loss = loss
        readings = {m: v for m in METRICS if (v := number(row, m)) is not None and math.isfinite(v)}
        if not readings:
            return []
        if step == 0:
            self.init.update(readings)
            for m in METRICS:
                noise = number(row, f"{m}_noise")
                if noise is not None and math.isfinite(noise) and noise > 0:
                    self.noise[m] = noise
        below_init, below_best, under_init = {}, {}, set()
        for m, value in readings.items():
            self.first.setdefault(m, value)
            noise = self._noise_of(m)
            if noise is not None and step > 0:
                one = math.sqrt(2) * noise  # the noise of a difference of two readings
                margin = self.cfg.eval_regression_noise_multiple * one
                if m in self.init and value < self.init[m] - one:
                    under_init.add(m)
                if m in self.init and value < self.init[m] - margin:
                    below_init[m] = (value, self.init[m], noise)
                if m in self.best and value < self.best[m] - margin:
                    below_best[m] = (value, self.best[m], noise)
            self.best[m] = max(self.best.get(m, value), value)
        alerts = []
        # Critical: one reading far below random init, and the other below it too (beyond one noise): a probe alone
        # can dip while the kNN says the features still separate better than at init (a benign lr blow-up on the
        # shapes read 4 points below on the probe, 1 above on the kNN).
        worse = bool(below_init) and under_init == set(readings)
        if self.critical_gate.observe("init", worse, 1):
            metric = next(iter(below_init))
            value, init, noise = below_init[metric]
            alerts.append(self._alert(step, "critical", metric, value, (
                f"the representation is worse than at random init: {metric} = {fmt(value)} at step {step}, "
                f"{100 * (init - value):.1f} points below the untrained encoder's {fmt(init)} (one evaluation's "
                f"noise: {100 * noise:.1f} points){self._loss_words()}. Training is destroying what the random "
                "features already separated. Check first the learning rate (lower it), the masks (targets too large "
                "or too small for the images), the augmentation (crops that cut the object away) and the EMA "
                "momentum; compare with a run at a lower lr from the last checkpoint before the fall.")))
        both = len(below_best) == len(readings) == len(METRICS)
        if self.gate.observe("best", both and not below_init, 1):
            metric = METRICS[0]
            value, best, noise = below_best[metric]
            alerts.append(self._alert(step, "warning", metric, value, (
                f"the representation is losing what it learnt: {metric} = {fmt(value)} at step {step}, "
                f"{100 * (best - value):.1f} points below its best {fmt(best)} (one evaluation's noise: "
                f"{100 * noise:.1f} points), and knn/accuracy has fallen as far{self._loss_words()}. Check first the "
                "learning rate and its schedule, then the EMA momentum; a collapse rule usually follows.")))
        return alerts

    def _loss_words(self) -> str:
        if self.first_loss is None or self.last_loss is None or self.first_loss <= 0:
            return ""
        change = self.last_loss / self.first_loss - 1
        if change < 0:
            return f", while the loss fell {100 * -change:.0f}% since the start"
        return f", and the loss rose {100 * change:.0f}% since the start"
