"""What the detection library holds (design §7, §8): its faults and their grids, the rounds it was recorded in, and
the cases they make over its settings (their table is library_settings.py, beside this file). `research/library.py`
trains and records them; `research/detection.py` judges them.

A case is a setting, a seed and, for a fault run, a fault, a magnitude and an onset. Its name is its record's
directory (research/data/library/<setting>/<name>), its round says when it was recorded, and its split whether the rules
were tuned on it: the test split is every round recorded since the rules last changed (FIRST_TEST_ROUND to
TEST_ROUND, the newest).
"""

from __future__ import annotations

from dataclasses import dataclass

# The settings (what each is, its onsets and magnitudes) are their own table; re-exported for library.py.
from library_settings import SETTING, SETTINGS, Setting  # noqa: F401
# ... and so are the rounds (what each recorded, on which seeds and settings, and which are the test split).
from rounds import (FIRST_TEST_ROUND, ROUND_HEALTHY_SETTINGS, ROUND_SEED_SETTINGS, ROUND_SEEDS,  # noqa: F401
                    STUDY_FAULTS, STUDY_HEALTHY, STUDY_ROUNDS, TEST_ROUND)

SEEDS = 5  # healthy seeds 0-4 of every setting; fault grids rotate over them

# Each §8 fault: its config key and magnitudes from barely harmful to blunt (a switch has one).
FAULTS: dict[str, tuple[str, tuple]] = {
    "collapse": ("faults.collapse_weight", (0.3, 1.0, 3.0)),
    "lr_blowup": ("faults.lr_blowup_factor", (3.0, 10.0, 1000.0)),  # x1000 reaches NaN/Inf: a real divergence
    "mask_leak": ("faults.mask_leak_fraction", (0.02, 0.5)),  # an invariant: caught at once at any size
    "frozen_target": ("faults.frozen_target", (True,)),
    "target_copies_online": ("faults.target_copies_online", (True,)),
    "target_gradients": ("faults.target_gradients", (True,)),
}
# Cells added to a grid after it was first recorded, numbered after it so that recorded cases keep their seeds.
# lr x1e6 drives AdamW's decoupled weight decay past lr*wd = 2, where the weights grow geometrically: a divergence
# that reaches Inf/NaN within a few dozen steps (x1000 only wrecks the representation).
EXTRA_CELLS: tuple[tuple[str, float], ...] = (("lr_blowup", 1e6),)


@dataclass(frozen=True)
class Case:
    setting: str
    seed: int
    fault: str | None = None
    magnitude: float | bool | None = None
    onset: int | None = None

    @property
    def name(self) -> str:
        if self.fault is None:
            return f"healthy_s{self.seed}"
        mag = "on" if isinstance(self.magnitude, bool) else f"{self.magnitude:g}".replace("+", "")  # 1e06: a run name
        return f"{self.fault}_{mag}_at{self.onset}_s{self.seed}"

    @property
    def key(self) -> str:
        return f"{self.setting}/{self.name}"

    @property
    def round(self) -> int:
        seed_round = next((r for r, seeds in ROUND_SEEDS.items() if self.seed in seeds), 1)
        return max(SETTING[self.setting].round, seed_round)

    @property
    def split(self) -> str:
        return "test" if FIRST_TEST_ROUND <= self.round <= TEST_ROUND and self.round not in STUDY_ROUNDS else "tune"

    @property
    def parent(self) -> Case | None:
        return None if self.fault is None else Case(self.setting, self.seed)

    def fault_overrides(self) -> list[str]:
        if self.fault is None:
            return []
        key, _ = FAULTS[self.fault]
        value = "true" if self.magnitude is True else repr(float(self.magnitude))
        return [f"{key}={value}", f"faults.start_step={self.onset}"]

    def until(self) -> int:
        setting = SETTING[self.setting]
        if self.onset is None or setting.window is None:
            return setting.steps
        return min(setting.steps, self.onset + setting.window)


def grid_cells(setting: Setting | None = None) -> list[tuple[str, int, float | bool]]:
    """(fault, level, magnitude) of every grid cell of a setting: FAULTS' with the EXTRA_CELLS last in their fault's
    levels, or, for a setting with magnitudes of its own, those (no extra cells)."""
    own = dict(setting.magnitudes) if setting is not None else {}
    if own:
        return [(fault, level, m) for fault, (_, magnitudes) in FAULTS.items()
                for level, m in enumerate(own.get(fault, magnitudes))]
    cells = [(fault, level, m) for fault, (_, magnitudes) in FAULTS.items() for level, m in enumerate(magnitudes)]
    return cells + [(fault, len(FAULTS[fault][1]), m) for fault, m in EXTRA_CELLS]


def all_cases() -> list[Case]:
    """Every case in training priority order: the healthy runs (the parents), then the fault grids interleaved so
    that a library trained only part of the way already holds every fault at some magnitudes and onsets. The first
    round comes first, each later round after it."""
    first = [s for s in SETTINGS if s.round == 1]
    parents_first = sorted(first, key=lambda s: (not s.onsets, s.steps))  # settings with fault grids first
    healthy = [Case(s.name, seed) for s in parents_first for seed in range(SEEDS)]
    faults = []
    for setting in first:
        cell = 0
        grid = [(fault, list(enumerate(magnitudes))) for fault, (_, magnitudes) in FAULTS.items()]
        grid += [(fault, [(len(FAULTS[fault][1]), magnitude)]) for fault, magnitude in EXTRA_CELLS]
        for fault, levels in grid:
            for level, magnitude in levels:
                for when, onset in enumerate(setting.onsets):
                    # Seeds rotate over the grid in steps of two, so that even a switch's three cells (one per
                    # onset) land on several seeds.
                    rank = (level + when, when, list(FAULTS).index(fault))
                    faults.append((rank, Case(setting.name, 2 * cell % SEEDS, fault, magnitude, onset)))
                    cell += 1
    rounds = sorted({*ROUND_SEEDS, *(s.round for s in SETTINGS if s.round > 1)})
    later = [case for r in rounds for case in round_cases(r)]
    return healthy + [case for _, case in sorted(faults, key=lambda item: item[0])] + later


def round_cases(round_: int) -> list[Case]:
    """A later round: its new setting's healthy runs and whole grid (magnitudes x onsets, seeds rotating), and on
    earlier settings its two new seeds, each cell of their grid once at a rotating onset (healthy runs only on the
    settings of ROUND_HEALTHY_SETTINGS)."""
    if round_ in STUDY_ROUNDS:
        return study_cases()
    new = [s for s in SETTINGS if s.round == round_]
    earlier = [SETTING[name] for name in ROUND_SEED_SETTINGS.get(round_, ())]
    seeds = ROUND_SEEDS.get(round_, ())
    healthy = [Case(s.name, seed) for s in new for seed in range(SEEDS)]
    healthy += [Case(s.name, seed) for s in earlier for seed in seeds]
    healthy += [Case(name, seed) for name in ROUND_HEALTHY_SETTINGS.get(round_, ()) for seed in seeds]
    faults = []
    for setting in new:
        for cell, ((fault, level, magnitude), (when, onset)) in enumerate(
                (c, o) for c in grid_cells(setting) for o in enumerate(setting.onsets)):
            faults.append(((level + when, when), Case(setting.name, 2 * cell % SEEDS, fault, magnitude, onset)))
    for setting in earlier:
        for cell, (fault, level, magnitude) in enumerate(grid_cells(setting)):
            faults.append(((level, cell % 3), Case(setting.name, seeds[cell % len(seeds)], fault, magnitude,
                                                  setting.onsets[cell % len(setting.onsets)])))
    return healthy + [case for _, case in sorted(faults, key=lambda item: item[0])]


def study_cases() -> list[Case]:
    """The study round's cases: its healthy runs (the parents), then its fault cells."""
    return ([Case(setting, seed) for setting, seed in STUDY_HEALTHY]
            + [Case(setting, seed, fault, magnitude, onset) for setting, seed, fault, magnitude, onset in STUDY_FAULTS])
