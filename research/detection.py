"""Detection benchmark (design §7, §8): the early-warning rules replayed over the recorded library, judged by harm.

The library (research/data/library/, trained by `research/library.py --train`) holds healthy runs over seeds and
settings, and fault runs over a grid of magnitudes x onsets. Each fault run is labelled by what the fault did, not by
whether it was switched on (harmful or benign: research/ground_truth.py, with the two baselines it is raced against). A
harmful run must be caught (an alert of any severity after the onset), and before both baselines unless it is blunt
(ground_truth.py); a warning on a benign run is allowed and counted; a critical alert on a benign or healthy run is a
false alarm. Every rule must fire on some recorded case made for it (MADE_FOR), in the library as a whole: a split may
hold none that it fires on.

The library is split by seed and by setting (research/cases.py): thresholds are chosen on the tuning split; the
test split is every round recorded since the rules and thresholds last changed (research/rounds.py:
FIRST_TEST_ROUND on): other seeds and settings never tuned on, all recorded after the rules were frozen. Both are
printed and named, the shapes library first, then each family of real images recorded in research/data/real/
(research/real_split.py: digits a tuning family, clothes and photos and their second rounds test families; left out
when `--library` names another library), and how well each label-free estimator tracks the probe on them.

    python research/detection.py               # both splits, a summary each; exit 1 when a target is missed
    python research/detection.py --split tune  # only the tuning split (the one to look at while tuning)
    python research/detection.py --cases       # ... and one line per case
    python research/detection.py --split tune --collapse-fraction 0.66  # a study of the label's edge
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ground_truth import (COLLAPSE_FRACTION, EVAL_MARGIN, eval_baseline_step, harm,  # noqa: E402
                          loss_baseline_step, sibling_evaluations, unchanged_row)
from library import LIBRARY, Case, load_case, read_index, recorded_cases  # noqa: E402

from jepa_core.alerts.base import Alert  # noqa: E402
from jepa_core.alerts.engine import evaluate_rows  # noqa: E402
from jepa_core.config import Config, ConfigError, RulesConfig, apply_overrides  # noqa: E402
from jepa_core.workbench.doctor import run_facts  # noqa: E402

WARNINGS_PER_HEALTHY_RUN = 0.1  # target: at most 1 warning per 10 healthy runs
# The faults each rule is made for: every rule must fire on at least one of its cases, or be removed.
MADE_FOR = {
    "mask_leak": {"mask_leak"}, "target_gradients": {"target_gradients"}, "non_finite": {"lr_blowup"},
    "variance_collapse": {"collapse"}, "steady_collapse": {"collapse"}, "rank_collapse": {"collapse"},
    "false_comfort": {"collapse"}, "online_collapse": {"collapse"},
    "ema_stalled": {"frozen_target", "target_copies_online"}, "ema_runaway": {"lr_blowup"},
    "divergence": {"lr_blowup"}, "predictor_collapse": {"lr_blowup"},
}


# ------------------------------------------------------------------------------------------------------- judging


@dataclass
class Judgement:
    key: str
    split: str
    fault: str | None
    onset: int | None
    harm_step: int | None
    harm_why: str | None
    alerts: list[Alert]  # after the onset (every alert for a healthy run)
    loss_step: int | None
    eval_step: int | None
    first_loss_reading: int | None = None  # the first loss reading after the onset that the fault could have changed
    round: int = 1  # the library round that recorded the case (research/cases.py)
    # A healthy run whose evaluation fell EVAL_MARGIN below its own best (harmful only below every other healthy run
    # of its setting too): reported, not a target.
    slid: bool = False

    @property
    def harmful(self) -> bool:
        return self.harm_step is not None

    @property
    def blunt(self) -> bool:
        """A fault a baseline shows at the very first reading after the onset that the fault could have changed (a
        divergence to NaN/Inf, a target swapped for the online encoder mid-run; since round 44 also an evaluation
        read at that row, which round 43's `patch8` target trained from 330 fell at, 6 steps after its onset): no
        signal can come earlier than that row, so a tie with the baseline is the best case and being caught is the
        target."""
        if self.harm_why is not None and self.harm_why.endswith("non-finite"):
            return True
        return self.first_loss_reading is not None and self.first_loss_reading in (self.loss_step, self.eval_step)

    @property
    def first(self) -> int | None:
        return min((a.step for a in self.alerts), default=None)

    @property
    def criticals(self) -> list[Alert]:
        return [a for a in self.alerts if a.severity == "critical"]

    @property
    def warnings(self) -> list[Alert]:
        return [a for a in self.alerts if a.severity != "critical"]

    def beats(self, baseline: int | None) -> bool:
        return self.first is not None and (baseline is None or self.first < baseline)

    def lead(self, baseline: int | None) -> int | None:
        return None if self.first is None or baseline is None else baseline - self.first


def whole_rows(case_dir: Path) -> tuple[dict, list[dict], list[dict] | None]:
    """(the case's facts, the run's rows as the rules replay them, its healthy run's rows or None for a healthy run).

    Up to its onset a fault run is its healthy run bit for bit, and its record keeps there only the metrics read
    when it was recorded: the rows up to the onset are the healthy run's, so a rule on a metric added since (e.g.
    predictor_collapse's) has the history a live run gives it."""
    info, rows = load_case(case_dir)
    if info["fault"] is None:
        return info, rows, None
    parent = case_dir.parent / f"healthy_s{info['seed']}"
    if parent.name not in read_index(parent.parent):
        raise FileNotFoundError(f"{case_dir}: its healthy run {parent} is not recorded (train it with "
                                f"`python research/library.py --train`)")
    healthy = load_case(parent)[1]
    onset = info["onset"]
    return info, [r for r in healthy if r["step"] <= onset] + [r for r in rows if r["step"] > onset], healthy


def judge(case_dir: Path, rules: RulesConfig | None = None,
          collapse_fraction: float = COLLAPSE_FRACTION) -> Judgement:
    # A healthy run is judged by the same definition from its first reading: it must come out benign, or the
    # definition (not the rules) is wrong; the summary reports it as a check of the labels.
    info, rows, healthy = whole_rows(case_dir)
    onset = info["onset"]
    after = -1 if onset is None else onset  # rows at step s describe the state after update s
    facts = run_facts(case_dir)  # the record keeps its run's config.toml
    alerts = evaluate_rows(rows, rules, **facts)
    siblings = [] if healthy is not None else [
        readings for name, readings in _healthy_evaluations(case_dir.parent).items() if name != case_dir.name]
    harm_step, why = harm(rows, after, healthy, siblings, collapse_fraction, facts["eval_count"])
    # The first loss reading that the fault could have changed: one whose row still equals the run without the fault
    # in every logged value saw nothing of it (round 19's depth3 lr x1800 from update 480 read the same at 481, to
    # the last digit, and wrecked the run by the next reading at 494), so no signal could be earlier there.
    same = {} if healthy is None else {r["step"]: r for r in healthy}
    first_loss = next((r["step"] for r in rows if r["step"] > after and "loss" in r
                       and not unchanged_row(r, same.get(r["step"]))), None)
    case = Case(info["setting"], info["seed"])  # the library's current split, not the one at recording
    return Judgement(f"{info['setting']}/{case_dir.name}", case.split, info["fault"], onset, harm_step, why,
                     [a for a in alerts if a.step > after], loss_baseline_step(rows, after),
                     eval_baseline_step(rows, after), first_loss, case.round,
                     healthy is None and harm(rows, after, eval_count=facts["eval_count"])[0] is not None)


@functools.lru_cache(maxsize=None)
def _healthy_evaluations(setting_dir: Path) -> dict[str, dict[str, dict[int, float]]]:
    """The evaluation readings of each recorded healthy run of a setting, by its directory's name."""
    runs = sorted(setting_dir / name for name in read_index(setting_dir) if name.startswith("healthy_s"))
    return dict(zip((p.name for p in runs), sibling_evaluations(load_case(p)[1] for p in runs)))


def library_cases(root: Path = LIBRARY) -> list[Path]:
    return recorded_cases(root)


def study_arguments(doc: str, argv: list[str] | None) -> tuple[argparse.Namespace, RulesConfig]:
    """(arguments, rules) of a study of one rule on the library: a split (tuning unless asked: the test split is for
    reporting), thresholds changed by --set, and the library's root."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--split", choices=("tune", "test", "both"), default="tune")
    p.add_argument("--set", action="append", default=[], metavar="rules.KEY=VALUE")
    p.add_argument("--library", type=Path, default=LIBRARY)
    args = p.parse_args(argv)
    return args, apply_overrides(Config(), args.set).rules


# ------------------------------------------------------------------------------------------------------ reporting


def _lead_text(leads: list[int]) -> str:
    if not leads:
        return "-"
    return f"median {statistics.median(leads):+g}, worst {min(leads):+d}"


def summary(judgements: list[Judgement]) -> tuple[list[str], list[str]]:
    """(report lines, missed targets) for one split."""
    healthy = [j for j in judgements if j.fault is None]
    faults = [j for j in judgements if j.fault is not None]
    harmful = [j for j in faults if j.harmful]
    benign = [j for j in faults if not j.harmful]
    caught = [j for j in harmful if j.first is not None]
    sharp = [j for j in harmful if not j.blunt]
    before_loss = [j for j in sharp if j.beats(j.loss_step)]
    before_eval = [j for j in sharp if j.beats(j.eval_step)]
    false_healthy = [j for j in healthy if j.criticals]
    false_benign = [j for j in benign if j.criticals]
    healthy_warnings = sum(len(j.warnings) for j in healthy)
    mislabelled = [j for j in healthy if j.harmful]
    loss_leads = [x for j in caught if (x := j.lead(j.loss_step)) is not None]
    eval_leads = [x for j in caught if (x := j.lead(j.eval_step)) is not None]
    harm_leads = [x for j in caught if (x := j.lead(j.harm_step)) is not None]
    # A run set to stop on a critical alert stops only on these; the other catches are warnings that a person reads.
    stopped = [j for j in harmful if j.criticals]
    by_fault = {fault: (sum(bool(j.criticals) for j in harmful if j.fault == fault),
                        sum(j.fault == fault for j in harmful)) for fault in sorted({j.fault for j in harmful})}
    lines = [
        f"healthy runs {len(healthy)}, fault runs {len(faults)} ({len(harmful)} harmful, {len(benign)} benign)",
        f"harmful faults caught                 {len(caught)}/{len(harmful)}",
        f"  caught at or before its harm step   {sum(x >= 0 for x in harm_leads)}/{len(harmful)} (lead over harm "
        f"{_lead_text(harm_leads)})",
        f"  caught before the loss-only baseline {len(before_loss)}/{len(sharp)} (blunt faults, which a baseline "
        f"shows at its first reading after the onset, excluded: {len(harmful) - len(sharp)})",
        f"  caught before the evaluation baseline {len(before_eval)}/{len(sharp)}",
        f"  lead over loss-only, steps          {_lead_text(loss_leads)}"
        f" ({sum(j.loss_step is None for j in caught)} where the loss never showed it)",
        f"  lead over evaluation, steps         {_lead_text(eval_leads)}"
        f" ({sum(j.eval_step is None for j in caught)} where evaluation never showed it)",
        f"  with a critical alert (what rules.stop_on_critical stops) {len(stopped)}/{len(harmful)}: "
        + ", ".join(f"{fault} {n}/{total}" for fault, (n, total) in by_fault.items()),
        f"critical false alarms: healthy {len(false_healthy)}/{len(healthy)}, benign {len(false_benign)}/{len(benign)}",
        f"warnings on healthy runs              {healthy_warnings} in {len(healthy)} runs",
        f"warnings on benign fault runs         {sum(bool(j.warnings) for j in benign)}/{len(benign)} runs",
        f"healthy runs the harm definition calls harmful (must be 0) {len(mislabelled)}",
        f"  evaluation {100 * EVAL_MARGIN:g} points below its own best, no lower than another healthy run of its "
        f"setting (not harm) {sum(j.slid and not j.harmful for j in healthy)}",
    ]
    missed = [f"{j.key} missed" for j in harmful if j.first is None]
    missed += [f"{j.key} not before loss" for j in sharp if j.first is not None and not j.beats(j.loss_step)]
    missed += [f"{j.key} not before eval" for j in sharp if j.first is not None and not j.beats(j.eval_step)]
    missed += [f"{j.key} critical false alarm" for j in false_healthy + false_benign]
    missed += [f"{j.key} labelled harmful" for j in mislabelled]
    if healthy and healthy_warnings > WARNINGS_PER_HEALTHY_RUN * len(healthy):
        missed.append(f"{healthy_warnings} warnings on {len(healthy)} healthy runs")
    return lines, missed


def round_lines(judgements: list[Judgement]) -> list[str]:
    """One line per library round: the targets' counts on that round's cases alone (each round is reported once,
    when it is recorded; this is how it reads on the rules of now)."""
    out = []
    for number in sorted({j.round for j in judgements}):
        cases = [j for j in judgements if j.round == number]
        healthy = [j for j in cases if j.fault is None]
        harmful = [j for j in cases if j.fault is not None and j.harmful]
        benign = [j for j in cases if j.fault is not None and not j.harmful]
        sharp = [j for j in harmful if not j.blunt]
        on_time = sum(j.first is not None and j.first <= j.harm_step for j in harmful)
        out.append(
            f"  round {number:2d}: caught {sum(j.first is not None for j in harmful)}/{len(harmful)} ({on_time} at or "
            f"before harm), not blunt before both baselines "
            f"{sum(j.beats(j.loss_step) and j.beats(j.eval_step) for j in sharp)}/{len(sharp)}, critical false "
            f"alarms healthy {sum(bool(j.criticals) for j in healthy)}/{len(healthy)} benign "
            f"{sum(bool(j.criticals) for j in benign)}/{len(benign)}, healthy runs warned "
            f"{sum(bool(j.warnings) for j in healthy)}/{len(healthy)}, labelled harmful {sum(j.harmful for j in healthy)}")
    return out


def rule_lines(judgements: list[Judgement]) -> tuple[list[str], list[str]]:
    """(per rule: how many of the cases made for it it fired on, rules that never fired on one)."""
    lines, silent = [], []
    for rule, faults in MADE_FOR.items():
        made = [j for j in judgements if j.fault in faults and j.harmful]
        fired = [j for j in made if any(a.rule == rule for a in j.alerts)]
        lines.append(f"  {rule:18s} fires on {len(fired):3d} of {len(made):3d} harmful {'/'.join(sorted(faults))} runs")
        if made and not fired:
            silent.append(f"rule {rule} never fired on a case made for it")
    return lines, silent


def case_lines(judgements: list[Judgement]) -> list[str]:
    out = []
    for j in judgements:
        # The first four alerts, and every critical one after them: a false alarm must not hide behind warnings.
        shown = [a for i, a in enumerate(j.alerts) if i < 4 or a.severity == "critical"]
        fired = ", ".join(f"{a.rule}{'!' if a.severity == 'critical' else ''}@{a.step}" for a in shown)
        if len(shown) < len(j.alerts):
            fired += f" (+{len(j.alerts) - len(shown)} more)"
        label = "healthy" if j.fault is None else ("harmful" if j.harmful else "benign")
        harm_text = f"{j.harm_why}@{j.harm_step}" if j.harmful else "-"
        out.append(f"  {j.key:44s} {label:8s} harm {harm_text:28s} loss@{j.loss_step} eval@{j.eval_step} "
                   f"| {fired or 'no alert'}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--split", choices=("tune", "test", "both"), default="both")
    p.add_argument("--cases", action="store_true", help="one line per case")
    p.add_argument("--library", type=Path, default=LIBRARY)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="rules.KEY=VALUE",
                   help="judge with a changed threshold (tuning: look at --split tune only)")
    p.add_argument("--collapse-fraction", type=float, default=COLLAPSE_FRACTION, metavar="F",
                   help="judge by another label: a collapse is the rank or std below F of the healthy run's "
                        f"(a study of the label's edge; the label, and the figures to quote, use {COLLAPSE_FRACTION})")
    args = p.parse_args(argv)
    try:
        rules = apply_overrides(Config(), args.overrides).rules.validate()
    except (ConfigError, ValueError) as exc:
        p.error(str(exc))
    if not 0 < args.collapse_fraction < 1:
        p.error(f"--collapse-fraction must lie between 0 and 1, not {args.collapse_fraction}")
    found = library_cases(args.library)
    if not found:
        print(f"no recorded cases under {args.library}: train some with `python research/library.py --train`")
        return 2
    judgements = [judge(d, rules, args.collapse_fraction) for d in found]
    shown = [j for j in judgements if args.split in (j.split, "both")]
    if args.collapse_fraction != COLLAPSE_FRACTION:
        print(f"A STUDY OF THE LABEL, not figures to quote: a collapse is the rank or std below "
              f"{args.collapse_fraction:g} of the healthy run's (the label: {COLLAPSE_FRACTION:g})\n")
    lines = rule_lines(shown)[0]
    print(f"Every rule on the cases made for it ({'both splits' if args.split == 'both' else args.split + ' split'}):")
    print("\n".join(lines))
    # A rule must fire on some recorded case made for it, in the library as a whole (a split may hold none).
    failed = rule_lines(judgements)[1]
    if failed:
        print("targets MISSED in the library: " + "; ".join(failed))
    for split in ("tune", "test"):
        if args.split not in (split, "both"):
            continue
        chosen = [j for j in judgements if j.split == split]
        title = ("TUNING split (thresholds were chosen on these runs)" if split == "tune" else
                 "TEST split (recorded after the thresholds were frozen: new seeds and a setting never tuned on; "
                 "the figures to quote)")
        print(f"\n{title}")
        lines, missed = summary(chosen)
        if not chosen:  # nothing to judge is not a target met
            missed = [f"no {split} case is recorded yet: `python research/library.py --train` records them"]
        print("\n".join(lines))
        if chosen:
            print("round by round:\n" + "\n".join(round_lines(chosen)))
        if args.cases:
            print("\n".join(case_lines(chosen)))
        if missed:
            print(f"targets MISSED on the {split} split: " + "; ".join(missed))
        failed += missed
    if args.library == LIBRARY:  # another library given is judged alone
        failed += real_families(args.split)
    print("\ntargets met" if not failed else f"\n{len(failed)} target(s) missed")
    return 1 if failed else 0


def real_families(split: str) -> list[str]:
    """The recorded real-image families of `split` judged by the same label (research/real_split.py): their report,
    and a line for each family that missed a target."""
    import estimators
    import real_split

    failed, judged = [], []
    for family, family_split in sorted(real_split.FAMILIES.items()):
        root = real_split.RECORDED / family
        if split not in (family_split, "both") or not root.is_dir():
            continue
        lines, missed = real_split.summary(family, real_split.judge_family(root))
        print("\nREAL IMAGES, " + "\n".join(lines))
        judged += sorted(d for d in root.iterdir() if (d / "config.toml").is_file())
        if missed:
            failed.append(f"{missed} on the real-image family {family}")
    if judged:
        # How well each label-free estimator follows the probe on these runs (research/estimators.py; the family is
        # the image source, so a source's rounds are pooled).
        print("\nlabel-free estimators against the linear probe (Spearman's rho), per image source:")
        print("\n".join(estimators.report(judged)))
    return failed


if __name__ == "__main__":
    sys.exit(main())
