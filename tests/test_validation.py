"""Config validation holes: non-finite floats, derived sizes and run names are rejected before any work starts,
with a message that names the key (design §11)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from jepa_core.config import Config, ConfigError, apply_overrides, load_config, preset

from jepa_core.run.validation import validate_config
from jepa_core.data import make_shapes
from jepa_core.run.evaluation import run_evaluation
from jepa_core.method.model import JEPA
from jepa_core.train import main as train_main


def check(*overrides: str) -> Config:
    return validate_config(apply_overrides(preset("tiny"), list(overrides)))


# ------------------------------------------------------------------------------------------- non-finite floats
@pytest.mark.parametrize("override, key", [
    ("optim.lr=nan", "optim.lr"),
    ("optim.lr=inf", "optim.lr"),
    ("optim.lr=-inf", "optim.lr"),
    ("optim.grad_clip=nan", "optim.grad_clip"),
    ("model.mlp_ratio=nan", "model.mlp_ratio"),
    ("masks.target_scale=[0.1, nan]", r"masks.target_scale\[1\]"),
    ("faults.lr_blowup_factor=+inf", "faults.lr_blowup_factor"),
    ("rules.divergence_spike=nan", "rules.divergence_spike"),
])
def test_non_finite_override_rejected(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key}: expected a finite number"):
        check(override)


def float_fields(cfg: Config) -> list[tuple[str, str, bool]]:
    """(section, key, is_list) of every float-valued setting."""
    out = []
    for section in dataclasses.fields(cfg):
        for f in dataclasses.fields(getattr(cfg, section.name)):
            value = getattr(getattr(cfg, section.name), f.name)
            if isinstance(value, float) or (isinstance(value, list) and isinstance(value[0], float)):
                out.append((section.name, f.name, isinstance(value, list)))
    return out


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_every_float_field_rejects_non_finite_set_in_python(bad: float) -> None:
    # A notebook sets fields directly, bypassing the TOML coercion: validate_config() must catch it for every key.
    fields = float_fields(preset("tiny"))
    assert len(fields) > 40  # the model, data, masks, optim, ema, faults and rules floats
    for section, key, is_list in fields:
        cfg = preset("tiny")
        value = getattr(getattr(cfg, section), key)
        setattr(getattr(cfg, section), key, [value[0], bad] if is_list else bad)
        with pytest.raises(ConfigError, match=rf"^{section}\.{key}\b"):
            validate_config(cfg)


def test_non_finite_in_toml_file_rejected(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('preset = "tiny"\n[optim]\nlr = nan\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="optim.lr: expected a finite number, got nan"):
        load_config(path)


# ------------------------------------------------------------------------------------------------ derived sizes
@pytest.mark.parametrize("key", ["non_finite_metrics", "ema_frozen_metrics"])
def test_a_rule_metric_list_names_only_registered_metrics(key: str) -> None:
    check(f"rules.{key}='loss'" if key == "non_finite_metrics" else f"rules.{key}='target/fixed_batch_std_mean'")
    with pytest.raises(ConfigError, match=rf"rules\.{key}: 'grad_nrom' is not a registered metric"):
        check(f"rules.{key}='loss,grad_nrom'")


def test_mlp_hidden_width_must_be_at_least_one() -> None:
    with pytest.raises(ConfigError, match=r"model.mlp_ratio 0.001 .*int\(96 \* 0.001\) = 0 .*model.embed_dim"):
        check("model.mlp_ratio=0.001")
    # The predictor is narrower than the encoder: a ratio that leaves the encoder one unit leaves it none.
    with pytest.raises(ConfigError, match=r"model.mlp_ratio .* model.pred_dim=48"):
        check("model.mlp_ratio=0.015")
    assert check("model.mlp_ratio=0.021").model.mlp_ratio == 0.021  # int(48 * 0.021) = 1


def test_heldout_too_small_for_knn_names_the_keys() -> None:
    with pytest.raises(ConfigError, match=r"data.num_heldout 1 is too small: .*eval.knn_k=20.* at least 40"):
        check("data.num_heldout=1")
    with pytest.raises(ConfigError, match=r"data.num_heldout 39 .*eval.knn_k=20"):
        check("data.num_heldout=39")
    check("data.num_heldout=40")
    check("data.num_heldout=14", "eval.knn_k=7")


def test_heldout_minimum_for_probe_and_artifacts() -> None:
    with pytest.raises(ConfigError, match=r"data.num_heldout 12 .*eval.artifacts.* at least 13"):
        check("data.num_heldout=12", "eval.knn_k=1")
    check("data.num_heldout=13", "eval.knn_k=1")
    with pytest.raises(ConfigError, match=r"data.num_heldout 3 .*linear probe needs at least 4"):
        check("data.num_heldout=3", "eval.knn_k=1", "eval.artifacts=false")
    check("data.num_heldout=4", "eval.knn_k=1", "eval.artifacts=false")


@pytest.mark.parametrize("num_heldout, knn_k, artifacts", [(13, 1, True), (4, 1, False), (6, 3, False)])
def test_smallest_accepted_heldout_split_evaluates(tmp_path: Path, num_heldout: int, knn_k: int,
                                                   artifacts: bool) -> None:
    """The minimum validation accepts is one the evaluation really runs on, with the configured k."""
    cfg = check("model.img_size=16", "model.embed_dim=32", "model.depth=1", "model.num_heads=2",
                "model.pred_dim=16", "model.pred_depth=1", "model.pred_num_heads=2", "masks.num_targets=2",
                "eval.probe_epochs=2", f"data.num_heldout={num_heldout}", f"eval.knn_k={knn_k}",
                f"eval.artifacts={str(artifacts).lower()}")
    with pytest.raises(ConfigError):
        check(*[f"{k}={v}" for k, v in (("data.num_heldout", num_heldout - 1), ("eval.knn_k", knn_k),
                                         ("eval.artifacts", str(artifacts).lower()))])
    m = cfg.model
    model = JEPA(m)
    heldout = make_shapes(num_heldout, m.img_size, cfg.data.num_classes, seed=1)
    result = run_evaluation(model, heldout, cfg, torch.device("cpu"), 0, tmp_path if artifacts else None, None, None)
    # step 0 also measures one evaluation's noise (eval.noise_splits other halvings)
    assert set(result) == {"knn/accuracy", "linear_probe/train_acc", "linear_probe/val_acc", "knn/accuracy_noise",
                           "linear_probe/val_acc_noise", "target/lidar", "target/lidar_noise"}
    if artifacts:
        assert list(tmp_path.glob("neighbours*.png"))


def write_image_folder(root: Path, per_class: int, classes: int = 2) -> None:
    for c in range(classes):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (8, 8), (40 * c, 7 * i, 0)).save(root / f"class{c}" / f"{i}.png")


def test_folder_heldout_checked_without_loading(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "imgs", per_class=10)  # 20 images, 0.2 held out: 4
    base = ["data.dataset=folder", f"data.path={json.dumps(str(tmp_path / 'imgs'))}", "eval.knn_k=2",
            "optim.batch_size=8", "optim.gns_microbatches=2"]  # 16 training images: two batches
    with pytest.raises(ConfigError, match=r"data.heldout_fraction 0.2 holds out 4 of the 20 images in data.path "
                                          r".*eval.artifacts"):
        check(*base)
    check(*base, "eval.artifacts=false")  # 4 labelled images: two per probe half, 2 neighbours
    with pytest.raises(ConfigError, match=r"holds out 2 of the 20 .*linear probe"):
        check(*base, "eval.artifacts=false", "data.heldout_fraction=0.1")


def test_npz_heldout_checked_from_the_header(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    np.savez(path, images=np.zeros((30, 8, 8, 3), np.uint8), labels=np.arange(30) % 3)
    base = ["data.dataset=npz", f"data.path={json.dumps(str(path))}", "optim.batch_size=8"]
    with pytest.raises(ConfigError, match=r"data.heldout_fraction 0.2 holds out 6 of the 30 .*eval.knn_k=20"):
        check(*base)
    check(*base, "eval.knn_k=3", "eval.artifacts=false")
    # Unlabelled images skip the kNN and the probe; only the nearest-neighbour artifact needs images.
    np.savez(path, images=np.zeros((30, 8, 8, 3), np.uint8))
    check(*base, "eval.artifacts=false")
    with pytest.raises(ConfigError, match="eval.artifacts"):
        check(*base)


def test_unreadable_data_path_is_left_to_the_loader(tmp_path: Path) -> None:
    # Validation cannot count what it cannot read; the loader's DataError says why, still before the run dir.
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    check("data.dataset=npz", f"data.path={json.dumps(str(tmp_path / 'x.npz'))}")
    check("data.dataset=folder", f"data.path={json.dumps(str(tmp_path / 'missing'))}")


# ------------------------------------------------------------------------------------------------------ run names
@pytest.mark.parametrize("name", ["a\nb", "x" * 101, "a/b", "a\\b", "a b", ".hidden", "..", "-rf", "tab\t",
                                  "\x1b]0;pwned\x07", "caf\u00e9", "end\n", "nul\x00"])
def test_bad_run_name_rejected(name: str) -> None:
    cfg = preset("tiny")
    cfg.logging.name = name
    with pytest.raises(ConfigError, match=r"logging.name .* at most 100 ASCII letters, digits, '.', '_' and '-'"):
        validate_config(cfg)


@pytest.mark.parametrize("name", ["", "A", "run-1.2_b", "x" * 100, "2024.01.01"])
def test_good_run_name_accepted(name: str) -> None:
    cfg = preset("tiny")
    cfg.logging.name = name
    assert validate_config(cfg).logging.name == name


# ---------------------------------------------------------------------------------------------- through the CLI
@pytest.mark.parametrize("args, key", [
    (["--set", "data.num_heldout=1"], "data.num_heldout"),
    (["--set", "optim.lr=nan"], "optim.lr"),
    (["--name", "x" * 300], "logging.name"),
    (["--name", "two\nlines"], "logging.name"),
])
def test_cli_rejects_before_creating_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str], args: list[str], key: str) -> None:
    monkeypatch.chdir(tmp_path)  # runs would land in ./runs
    code = train_main(["--quiet", "--set", "optim.steps=2", "--set", "optim.warmup_steps=1", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {key}") and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_integers_past_tomls_range_are_refused_before_they_reach_a_file() -> None:
    for item in ("optim.steps=99999999999999999999", "optim.steps=-99999999999999999999"):
        with pytest.raises(ConfigError, match="optim.steps: .* outside TOML's 64-bit integer range"):
            check(item)
    with pytest.raises(ConfigError, match='model.depth: expected an integer, got \'3\''):
        check('model.depth="3"')  # a string is never turned into a number


def test_a_training_set_smaller_than_one_batch_is_refused(tmp_path: Path) -> None:
    import numpy as np

    with pytest.raises(ConfigError, match="data.num_train 10 is smaller than optim.batch_size 64"):
        check("data.num_train=10")
    check("data.num_train=64")  # one batch is enough
    np.savez(tmp_path / "small.npz", images=np.zeros((200, 8, 8), dtype=np.uint8), labels=np.arange(200) % 4)
    small = ['data.dataset="npz"', f'data.path="{tmp_path / "small.npz"}"']
    with pytest.raises(ConfigError, match="leaves 160 training images .* fewer than optim.batch_size 256"):
        check(*small, "optim.batch_size=256")
    check(*small, "optim.batch_size=160")


def test_check_counts_the_evaluations_of_a_very_long_run_without_listing_them() -> None:
    from jepa_core.check import evaluations

    cfg = check("optim.steps=9223372036854775807", "diagnostics.eval_every_steps=400")
    assert evaluations(cfg) == 9223372036854775807 // 400 + 2  # the last step's and step 0's too
    assert evaluations(check("optim.steps=1600", "diagnostics.eval_every_steps=400")) == 5
