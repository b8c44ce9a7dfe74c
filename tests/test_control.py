"""Live control file: validation names the key, atomic writes, cheap change detection in the trainer."""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import pytest

from jepa_core.config import CADENCE_KEYS, DiagnosticsConfig
from jepa_core.run.control import (ControlError, ControlWatcher, control_path, read_control, validate_control,
                                   write_control)


def test_control_accepts_every_cadence_of_the_config_dataclass_and_nothing_else():
    every = {f.name: 3 for f in dataclasses.fields(DiagnosticsConfig)}
    assert validate_control(every) == every
    assert set(every) == set(CADENCE_KEYS)
    with pytest.raises(ControlError, match=", ".join(CADENCE_KEYS)):  # the error lists the valid keys
        validate_control({"max_tokens": 3})


def test_write_merges_and_reads_back(tmp_path):
    write_control(tmp_path, basic_every_steps=5)
    state = write_control(tmp_path, covariance_every_steps=50, stop=False)
    assert state == {"basic_every_steps": 5, "covariance_every_steps": 50, "stop": False}
    assert read_control(tmp_path) == state
    assert json.loads(control_path(tmp_path).read_text()) == state
    assert [p.name for p in tmp_path.iterdir()] == ["control.json"]  # no temporary files left behind


@pytest.mark.parametrize("changes, key", [({"basic_every_steps": 0}, "basic_every_steps"),
                                          ({"eval_every_steps": -3}, "eval_every_steps"),
                                          ({"eval_every_steps": 2.5}, "eval_every_steps"),
                                          ({"eval_every_steps": True}, "eval_every_steps"),
                                          ({"loss_every_steps": 5}, "loss_every_steps"),
                                          ({"stop": "yes"}, "stop")])
def test_invalid_changes_raise_naming_the_key_and_write_nothing(tmp_path, changes, key):
    with pytest.raises(ControlError, match=f"'{key}'"):
        write_control(tmp_path, **changes)
    assert not control_path(tmp_path).exists()


def test_watcher_returns_state_only_when_file_changes(tmp_path):
    watcher = ControlWatcher(tmp_path)
    assert watcher.poll() is None  # no file yet
    write_control(tmp_path, basic_every_steps=7)
    assert watcher.poll() == {"basic_every_steps": 7}
    assert watcher.poll() is None  # unchanged
    write_control(tmp_path, basic_every_steps=3)
    assert watcher.poll() == {"basic_every_steps": 3}
    assert not watcher.stop_requested
    write_control(tmp_path, stop=True)
    assert watcher.poll() == {"basic_every_steps": 3, "stop": True}
    assert watcher.stop_requested


def test_watcher_keeps_previous_values_on_hand_edited_bad_file(tmp_path, caplog):
    watcher = ControlWatcher(tmp_path)
    write_control(tmp_path, mask_check_every_steps=4)
    assert watcher.poll() == {"mask_check_every_steps": 4}
    path = control_path(tmp_path)
    with caplog.at_level(logging.WARNING, logger="jepa_core.run.control"):
        path.write_text('{"mask_check_every_steps": 0}')
        os.utime(path, ns=(1, 1))  # make sure the change is visible even on coarse mtime filesystems
        assert watcher.poll() is None
        path.write_text("{not json")
        assert watcher.poll() is None
    assert watcher.current == {"mask_check_every_steps": 4}
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "'mask_check_every_steps'" in messages and "not valid JSON" in messages


def test_read_control_reports_bad_json_with_file_name(tmp_path):
    control_path(tmp_path).write_text("[1, 2")
    with pytest.raises(ControlError, match="control.json"):
        read_control(tmp_path)
    assert read_control(tmp_path / "missing") == {}


def test_write_control_replaces_an_invalid_hand_edited_file(tmp_path):
    control_path(tmp_path).write_text('{"bogus": 1}')
    assert write_control(tmp_path, eval_every_steps=10) == {"eval_every_steps": 10}
