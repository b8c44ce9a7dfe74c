"""The one config check (jepa_core.config.schema): every key's type and range, declared on its dataclass field and
checked by msgspec with no coercion, and the cross-field checks; each refusal names the key, before any work."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from jepa_core.config import (CROSS_CHECKS, PRESETS, Config, ConfigError, apply_overrides, check_config, load_config,
                              preset)
from jepa_core.config.mapping import apply_mapping
from jepa_core.config.schema import describe, field_types
from jepa_core.run.validation import validate_config


def refused(*overrides: str) -> str:
    """The message of the ConfigError that the overrides on the tiny preset, then the check, raise."""
    with pytest.raises(ConfigError) as info:
        check_config(apply_overrides(preset("tiny"), list(overrides)))
    return str(info.value)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_passes_the_check(name: str) -> None:
    assert check_config(preset(name)) is not None
    validate_config(preset(name))  # and the checks that need the data, the masks and the registry


def test_the_dataclass_defaults_pass_the_check() -> None:
    check_config(Config())


@pytest.mark.parametrize("override, message", [
    ('model.depth="3"', "model.depth: expected an integer, got '3'"),  # a string is never turned into a number
    ("model.depth=3.0", "model.depth: expected an integer, got 3.0"),  # nor a float into an integer
    ("model.depth=true", "model.depth: expected an integer, got True"),  # bool is an int subclass in Python: refused
    ('optim.lr="1e-3"', "optim.lr: expected a number, got '1e-3'"),
    ("optim.lr=false", "optim.lr: expected a number, got False"),
    ("logging.tensorboard=1", "logging.tensorboard: expected true or false, got 1"),
    ("logging.name=3", "logging.name: expected a string, got 3"),
    ("masks.target_scale=0.2", "masks.target_scale: expected a list of 2 numbers, got 0.2"),
    ("masks.target_scale=[0.1, 0.2, 0.3]", "masks.target_scale: expected a list of 2 numbers, got [0.1, 0.2, 0.3]"),
    ('masks.target_scale=[0.1, "x"]', "masks.target_scale[1]: expected a number, got 'x'"),
])
def test_wrong_types_are_refused_naming_the_key(override: str, message: str) -> None:
    assert refused(override) == message


def test_wrong_types_set_in_python_are_refused_too() -> None:
    cfg = preset("tiny")
    cfg.model.depth = True  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="^model.depth: expected an integer, got True$"):
        check_config(cfg)
    cfg = preset("tiny")
    cfg.optim.steps = "100"  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="^optim.steps: expected an integer, got '100'$"):
        check_config(cfg)


def test_an_int_is_accepted_where_a_float_is_declared_and_becomes_a_float() -> None:
    cfg = apply_overrides(preset("tiny"), ["optim.lr=1", "rules.trend_drift=3"])
    assert cfg.optim.lr == 1.0 and type(cfg.optim.lr) is float and type(cfg.rules.trend_drift) is float


@pytest.mark.parametrize("override, message", [
    ("optim.lr=0", "optim.lr: must be positive, got 0.0"),  # a float key holds a float
    ("optim.lr=-1e-3", "optim.lr: must be positive, got -0.001"),
    ("optim.steps=0", "optim.steps: must be positive, got 0"),
    ("optim.beta2=1.0", "optim.beta2: must be in [0, 1), got 1.0"),
    ("ema.start=1.5", "ema.start: must be in [0, 1], got 1.5"),
    ("ema.end=1.01", "ema.end: must be in [0, 1], got 1.01"),
    ("diagnostics.covariance_every_steps=0", "diagnostics.covariance_every_steps: must be positive, got 0"),
    ("logging.checkpoint_every_steps=0", "logging.checkpoint_every_steps: must be positive, got 0"),
    ("data.num_workers=257", "data.num_workers: must be in [0, 256], got 257"),
    ("data.heldout_fraction=1.0", "data.heldout_fraction: must be in (0, 1), got 1.0"),
    ("masks.target_scale=[0.1, 1.0]", "masks.target_scale[1]: must be in (0, 1), got 1.0"),
    ("model.embed_dim=90", "model.embed_dim: must be positive and a multiple of 4 (2-D sin-cos positions), got 90"),
    ("eval.lidar_views=1", "eval.lidar_views: must be at least 2, got 1"),
    ("optim.loss=l3", "optim.loss: must be mse or smooth_l1, got 'l3'"),
    ("runtime.device=tpu", "runtime.device: must be auto, cpu, cuda, cuda:N or mps, got 'tpu'"),
    ("logging.runs_dir=''", "logging.runs_dir: must be non-empty, got ''"),
    ("rules.steady_fall=0", "rules.steady_fall: must be in (0, 1), got 0.0"),
    ("rules.rearm_readings=0", "rules.rearm_readings: must be at least 1, got 0"),
    ("optim.lr=nan", "optim.lr: expected a finite number, got nan"),
    ("optim.steps=9223372036854775808", "optim.steps: 9223372036854775808 is outside TOML's 64-bit integer range"),
])
def test_out_of_range_values_are_refused_naming_the_key(override: str, message: str) -> None:
    assert refused(override) == message


def test_ranges_are_checked_on_a_config_set_in_python() -> None:
    for section, key, bad in (("optim", "lr", 0.0), ("optim", "steps", 0), ("ema", "start", 1.2),
                              ("diagnostics", "eval_every_steps", 0), ("rules", "trend_slope_readings", 0.0)):
        cfg = preset("tiny")
        setattr(getattr(cfg, section), key, bad)
        with pytest.raises(ConfigError, match=rf"^{section}\.{key}: must be "):
            check_config(cfg)


def test_every_key_declares_its_type_and_every_number_its_range() -> None:
    # A number without a declared range would take any value silently; only the seed may be any integer.
    for section in dataclasses.fields(Config):
        cls = type(getattr(Config(), section.name))
        for name, t in field_types(cls).items():
            value = getattr(getattr(Config(), section.name), name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and f"{section.name}.{name}" != \
                    "runtime.seed":
                assert describe(t), f"{section.name}.{name} declares no range"


CROSS_CASES = {
    "usable_run_name": (["logging.name='a b'"], r"^logging.name 'a b' .* is not a usable run name"),
    "pairs_ordered": (["masks.target_aspect=[2.0, 0.5]"], "^masks.target_aspect: min 2.0 is greater than max 0.5$"),
    "patches_tile_image": (["model.img_size=30"], "^model.img_size 30 is not divisible by model.patch_size 4$"),
    "heads_split_width": (["model.pred_num_heads=5"], "^model.pred_dim 48 is not divisible by model.pred_num_heads 5"),
    "mlp_has_width": (["model.mlp_ratio=0.001"], r"^model.mlp_ratio 0.001 .* model.embed_dim=96; it must be at least"),
    "data_path_given": (["data.dataset=folder"], "^data.path is required when data.dataset = 'folder'$"),
    "shapes_fill_a_batch": (["data.num_train=10"], "^data.num_train 10 is smaller than optim.batch_size 64"),
    "warmup_within_run": (["optim.steps=10", "optim.warmup_steps=11"],
                          "^optim.warmup_steps 11 exceeds optim.steps 10"),
    "microbatches_split_batch": (["optim.gns_microbatches=3"],
                                 "^optim.gns_microbatches 3 must divide optim.batch_size 64$"),
    "ema_does_not_fall": (["ema.start=1.0", "ema.end=0.99"], r"^ema.start \(1.0\) must not exceed ema.end \(0.99\)"),
    "lidar_has_images": (["eval.lidar_images=1"], "^eval.lidar_images must be 0 .off. or at least 2, got 1$"),
    "one_target_fault": (["faults.frozen_target=true", "faults.target_copies_online=true"],
                         "^faults.frozen_target and faults.target_copies_online cannot both be on$"),
}


def test_every_cross_field_check_has_a_case() -> None:
    assert sorted(check.__name__ for check in CROSS_CHECKS) == sorted(CROSS_CASES)


@pytest.mark.parametrize("name", sorted(CROSS_CASES))
def test_each_cross_field_check_names_its_keys(name: str) -> None:
    overrides, pattern = CROSS_CASES[name]
    cfg = apply_overrides(preset("tiny"), overrides)  # each value alone is in range: only the relation is wrong
    check = next(c for c in CROSS_CHECKS if c.__name__ == name)
    assert check(cfg) is not None and check(preset("tiny")) is None
    with pytest.raises(ConfigError, match=pattern):
        check_config(cfg)


def test_unknown_keys_and_sections_are_named_with_their_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--set: unknown key optim.stpes \(did you mean optim.steps\?\); known "):
        apply_overrides(preset("tiny"), ["optim.stpes=3"])
    with pytest.raises(ConfigError, match=r"^--set: unknown key optim.nonsense; known keys: batch_size, "):
        apply_overrides(preset("tiny"), ["optim.nonsense=3"])
    with pytest.raises(ConfigError, match=r"^--set: unknown section 'optm'; known sections: model, "):
        apply_overrides(preset("tiny"), ["optm.lr=3"])
    path = tmp_path / "run.toml"
    path.write_text("[model]\ndepht = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}: unknown key model.depht \(did you mean model.depth\?\)"):
        load_config(path)


def test_a_bad_value_in_a_file_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('[model]\ndepth = "3"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="^model.depth: expected an integer, got '3'$"):
        load_config(path)
    # A file carries any value of the right type (a config round-trips, valid or not); the check refuses it.
    path.write_text("[optim]\nsteps = 0\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.optim.steps == 0
    with pytest.raises(ConfigError, match="^optim.steps: must be positive, got 0$"):
        check_config(cfg)


def test_a_refused_mapping_leaves_the_config_as_it_was() -> None:
    cfg = preset("tiny")
    with pytest.raises(ConfigError, match="^optim.lr: expected a number, got 'x'$"):
        apply_mapping(cfg, {"optim": {"steps": 5, "lr": "x"}}, source="test")
    assert cfg == preset("tiny")
