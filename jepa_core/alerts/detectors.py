"""Streaming statistical primitives for the early-warning rules (design §7).

Every object here holds a fixed number of floats, whatever the length of the stream, so a rule built from them is
O(1) in memory and can run live inside training, over a finished metrics file, or in a notebook.

`TrendBreak` measures its level and slope per training step, not per reading, so the same thresholds hold whatever
the cadence a metric is logged at (the tiny preset's and a big run's differ).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

__all__ = [
    "RobustBaseline",
    "OneSidedCusum",
    "EpisodeGate",
    "TrendBreak",
    "FallFromStable",
    "FallOverWindow",
    "FirstDescent",
]


@dataclass
class RobustBaseline:
    """Running centre and scale that a few outliers cannot drag: both learn from residuals clipped to +-clip scales.

    `scale` is an EWMA of the absolute residual (a mean-absolute-deviation estimate), floored at `min_scale` so a
    very smooth stream does not turn tiny wiggles into huge z-scores. `z(x)` is computed against the state *before*
    `update(x)`, so an outlier is judged by the history it did not yet influence.
    """

    alpha: float
    clip: float = 3.0
    min_scale: float = 1e-12
    scale_alpha: float | None = None  # the scale's own (usually slower) rate; None: alpha
    center: float | None = None
    scale: float | None = None
    count: int = 0

    def z(self, x: float) -> float:
        if self.center is None or self.scale is None:
            return 0.0
        return (x - self.center) / max(self.scale, self.min_scale)

    def update(self, x: float, suspect: bool = False) -> None:
        """Learn from `x`. `suspect=True` (a detector thinks a shift is under way): centre and scale learn at a
        quarter of their rate, so the baseline does not absorb the very shift being tested."""
        self.count += 1
        if self.center is None or self.scale is None:
            self.center, self.scale = x, 0.0
            return
        limit = self.clip * max(self.scale, self.min_scale)
        raw = x - self.center
        clipped = max(-limit, min(limit, raw))
        slow = 0.25 if suspect else 1.0
        # Early on, a plain running mean (rate 1/n) instead of the EWMA: an EWMA started from a couple of readings
        # underestimates the scale for a long time, which inflates every z-score. While the scale is still near 0
        # residuals count unclipped, or it could never grow.
        scale_rate = max(self.alpha if self.scale_alpha is None else self.scale_alpha, 1.0 / (self.count - 1))
        if self.count <= 3:
            self.scale += scale_rate * (abs(raw) - self.scale)
        else:
            self.scale += slow * scale_rate * (abs(clipped) - self.scale)
        self.center += slow * self.alpha * clipped


@dataclass
class OneSidedCusum:
    """Page's one-sided CUSUM on z-scores: S = max(0, S + min(z, clip) - drift); alarm while S >= threshold.

    The clip bounds what one reading can add, so a single spike (at most clip - drift) cannot raise an alarm when
    threshold > clip - drift; only several consecutive high readings - a sustained shift - can.
    """

    drift: float
    threshold: float
    clip: float
    total: float = 0.0

    def update(self, z: float) -> bool:
        self.total = max(0.0, self.total + min(z, self.clip) - self.drift)
        return self.total >= self.threshold

    def reset(self) -> None:
        self.total = 0.0


@dataclass
class EpisodeGate:
    """Patience and per-episode dedup for one rule watching one or more keys.

    `observe(key, condition, patience)` counts consecutive readings of `key` with the condition true. The rule fires
    once when any key's streak reaches its patience; it re-arms only after `rearm` consecutive observations during
    which no key was in the condition. Memory: one counter per key (a fixed set per rule).
    """

    rearm: int
    streaks: dict[str, int] = field(default_factory=dict)
    armed: bool = True
    clear_observations: int = 0

    def observe(self, key: str, condition: bool, patience: int) -> bool:
        self.streaks[key] = self.streaks.get(key, 0) + 1 if condition else 0
        if self.armed:
            if self.streaks[key] >= max(1, patience):
                self.armed = False
                self.clear_observations = 0
                return True
            return False
        if any(self.streaks.values()):
            self.clear_observations = 0
        else:
            self.clear_observations += 1
            if self.clear_observations >= max(1, self.rearm):
                self.armed = True
        return False


@dataclass
class TrendBreak:
    """A downward break in a signal's own trend: Holt's linear smoothing per step, innovations in units of their
    own robust noise, and a one-sided CUSUM on the shortfall.

    Each reading is compared with what the run's recent level and slope predict for its step, so a healthy drift
    (falling or rising at the pace the signal has kept) scores about 0, and only a fall faster than that pace, held
    over several readings, accumulates. Feed it log values for a scale-free signal. The trend keeps learning during
    a break (the slope's memory bounds how fast it absorbs one): slowing it down then made healthy runs whose fall
    merely accelerated run away on the detection library.
    """

    level_steps: float  # the level's memory, in steps
    slope_steps: float  # the slope's memory, in steps (longer: the pace of the last few hundred steps)
    drift: float  # CUSUM allowance per reading, in noise scales
    threshold: float  # CUSUM alarm level, in noise scales
    clip: float = 4.0  # most one reading can add
    min_scale: float = 0.01  # floor of the innovation scale (a 1% move in log units)
    scale_alpha: float = 0.1
    min_innovations: int = 3  # innovations the noise scale learns from before the CUSUM adds anything
    min_span_steps: float = 0.0  # ... and the steps its readings must span (the pace needs time, not only readings)
    level: float | None = None
    first_step: int | None = None
    slope: float = 0.0
    scale: float = 0.0
    last_step: int | None = None
    count: int = 0
    total: float = 0.0

    def z(self, step: int, x: float) -> float:
        """The reading's shortfall below the trend's prediction, in noise scales (positive = lower than predicted)."""
        if self.level is None or self.last_step is None:
            return 0.0
        predicted = self.level + self.slope * max(0, step - self.last_step)
        return (predicted - x) / max(self.scale, self.min_scale)

    def update(self, step: int, x: float) -> bool:
        """Learn from the reading at `step`; True while the accumulated shortfall is at or above the threshold."""
        self.count += 1
        if self.level is None or self.last_step is None:
            self.level, self.last_step, self.first_step = x, step, step
            return False
        dt = step - self.last_step
        if dt <= 0:
            return self.total >= self.threshold
        z = self.z(step, x)
        first = self.first_step if self.first_step is not None else step  # a first reading at step 0 counts too
        if self.count > self.min_innovations and step - first >= self.min_span_steps:
            self.total = max(0.0, self.total + min(z, self.clip) - self.drift)
        predicted = self.level + self.slope * dt
        error = x - predicted
        rate = max(self.scale_alpha, 1.0 / (self.count - 1))
        limit = 3.0 * max(self.scale, self.min_scale)
        self.scale += rate * (min(abs(error), limit) - self.scale)
        a = 1.0 - math.exp(-dt / self.level_steps)
        b = 1.0 - math.exp(-dt / self.slope_steps)
        new_level = predicted + a * error
        self.slope += b * (new_level - self.level - self.slope * dt) / dt
        self.level, self.last_step = new_level, step
        return self.total >= self.threshold

    def clear(self) -> None:
        """Drop the accumulated shortfall (a fall now known to be over); the level, slope and noise are kept."""
        self.total = 0.0


@dataclass
class RecentHigh:
    """The highest reading of the last `window_steps` steps before the current one: what a fall within a few readings
    is measured from (online_collapse's ratio, divergence's prediction agreement, predictor_collapse's spread).

    Memory: the readings of the last `window_steps` steps.
    """

    window_steps: int
    recent: list[tuple[int, float]] = field(default_factory=list)

    def update(self, step: int, value: float) -> float | None:
        """The highest reading within `window_steps` before `step` (None: there is none); then remember this one."""
        self.recent = [(s, v) for s, v in self.recent if step - s <= self.window_steps]
        high = max((v for _, v in self.recent), default=None)
        self.recent.append((step, value))
        return high


@dataclass
class FallFromStable:
    """A fall of a smooth signal below the level it held when it was last stable.

    A reading is *stable* when the signal changed by at most `stable_change` (relative) over the last `window_steps`
    steps; the reference is the latest stable reading. While the signal drifts slowly the reference follows it, so
    no amount of slow drift fires; once the signal falls faster than that, the reference stays where the signal
    last rested and the fall accumulates against it. The complement of `TrendBreak` for a fall that is steady from
    its first step: such a fall sets a new pace that a trend learns, but it never rests. A signal that has not yet
    rested (a run's first steps, where healthy features reorganise) has no reference and cannot fire.

    Memory: the readings of the last `window_steps` steps (at most window_steps + 1, however long the stream).
    """

    window_steps: int
    stable_change: float  # relative change over the window at or below which a reading is stable
    fall: float  # fire while the signal is this fraction or more below the reference
    reference: float | None = None
    reference_step: int | None = None
    recent: deque = field(default_factory=deque)

    def update(self, step: int, value: float) -> bool:
        """Learn from the reading at `step` (a positive value); True while it sits `fall` or more below the
        reference."""
        self.recent.append((step, value))
        while len(self.recent) > 1 and self.recent[1][0] <= step - self.window_steps:
            self.recent.popleft()
        first_step, first_value = self.recent[0]
        if step - first_step >= self.window_steps and abs(value / first_value - 1.0) <= self.stable_change:
            self.reference, self.reference_step = value, step
        return self.reference is not None and value <= (1.0 - self.fall) * self.reference


@dataclass
class FallOverWindow:
    """A signal fallen `fall` (relative) or more below its reading `window_steps` earlier: the reference is the
    latest reading at least that old (120 steps back at a cadence of 30 and a window of 100). No history that old:
    nothing to compare, never fires.

    Memory: the readings of the last `window_steps` steps (at most window_steps + 1, however long the stream).
    """

    window_steps: int
    fall: float
    reference: float | None = None
    reference_step: int | None = None
    recent: deque = field(default_factory=deque)

    def update(self, step: int, value: float) -> bool:
        """Learn from the reading at `step` (a positive value); True while it sits `fall` or more below the
        reading of `window_steps` earlier."""
        self.recent.append((step, value))
        while len(self.recent) > 1 and self.recent[1][0] <= step - self.window_steps:
            self.recent.popleft()
        first_step, first_value = self.recent[0]
        if step - first_step < self.window_steps:
            self.reference = self.reference_step = None
            return False
        self.reference, self.reference_step = first_value, first_step
        return value <= (1.0 - self.fall) * first_value


@dataclass
class FirstDescent:
    """A signal's first descent: from its highest reading until it first climbs `recovery` (relative) back above the
    lowest reading since that peak. After that the descent is over for good.

    Healthy JEPA runs all make one: early in training the target's spread and rank fall while the features
    reorganise, then recover (every healthy run of the detection library: 3-20% on the fixed probe batch, more at a
    high lr). A collapse that starts inside that descent looks, for its first steps, like it. The descent has
    `begun` once the signal is `recovery` below its peak (less is noise); `depth` is the fall from the peak while
    the descent lasts, 0 once it is over.

    Memory: three floats.
    """

    recovery: float
    peak: float | None = None
    low: float | None = None
    over: bool = False

    def update(self, value: float) -> bool:
        """Learn from a reading; True at the reading that ends the descent."""
        if self.over:
            return False
        if self.peak is None or self.low is None or value >= self.peak:
            self.peak = self.low = value
            return False
        self.low = min(self.low, value)
        self.over = self.begun and value >= (1.0 + self.recovery) * self.low
        return self.over

    @property
    def begun(self) -> bool:
        return self.peak is not None and self.low is not None and self.low <= (1.0 - self.recovery) * self.peak

    @property
    def depth(self) -> float:
        if self.over or self.peak is None or self.low is None or self.peak <= 0:
            return 0.0
        return 1.0 - self.low / self.peak
