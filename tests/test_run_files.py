"""Hostile files in and around a run (issue 46): the writer never writes through a link planted in the run directory
(it opens its lock and its stream without following symbolic links, refuses before writing anything, and names the
file), and a config nested hundreds of levels deep is a clear error naming it, not a RecursionError."""

from __future__ import annotations

import os

import pytest

from jepa_core.common.atomic import UnsafeRunFileError, open_run_file
from jepa_core.metrics.stream import JsonlWriter
from jepa_core.run.lock import RunLock, lock_holder
from jepa_core.run.trainer import Trainer
from jepa_core.train import main
from test_train import fast_config

VICTIM = b"a file outside the run that must survive\n"


def planted(tmp_path, name: str):
    """A paused run whose `name` is replaced by a link to a file outside it; returns (run, victim)."""
    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "run", quiet=True)
    assert trainer.run(max_steps=6) == "paused"
    trainer.close()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    target = tmp_path / "run" / name
    target.unlink()
    target.symlink_to(victim)
    return tmp_path / "run", victim


@pytest.mark.parametrize("name", [".lock", "metrics.jsonl"])
def test_resume_refuses_a_planted_link_and_leaves_its_target_alone(tmp_path, capsys, name):
    run, victim = planted(tmp_path, name)
    stream = None if name == "metrics.jsonl" else (run / "metrics.jsonl").read_bytes()
    code = main(["--quiet", "--resume", str(run)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{run / name} is a symbolic link" in err
    assert victim.read_bytes() == VICTIM  # neither truncated (the lock) nor appended to (the stream)
    if stream is not None:
        assert (run / "metrics.jsonl").read_bytes() == stream
    assert lock_holder(run) is None  # a refused writer holds nothing


def test_the_lock_and_the_stream_refuse_links_and_non_files(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    (tmp_path / ".lock").symlink_to(victim)
    with pytest.raises(UnsafeRunFileError, match="symbolic link"):
        RunLock(tmp_path).acquire()
    (tmp_path / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(UnsafeRunFileError, match="metrics.jsonl is a symbolic link"):
        JsonlWriter(tmp_path / "metrics.jsonl", attempt=1)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeRunFileError, match="not a regular file"):
        open_run_file(tmp_path / "fifo", os.O_RDWR | os.O_CREAT)
    assert victim.read_bytes() == VICTIM
    fd = open_run_file(tmp_path / "plain", os.O_RDWR | os.O_CREAT)  # a plain file opens as before
    os.close(fd)


# ------------------------------------------------------------------------- a config nested hundreds of levels deep

DEEP = "[rules]\nx = " + "[" * 500 + "]" * 500 + "\n"


def test_a_deeply_nested_config_is_a_clear_error_everywhere_it_is_read(tmp_path, capsys):
    from jepa_core.cli import main as jepa
    from jepa_core.config import ConfigError, apply_overrides, preset
    from jepa_core.config.files import load_config
    from jepa_core.workbench.runs import read_config_file

    deep = tmp_path / "deep.toml"
    deep.write_text(DEEP)
    with pytest.raises(ConfigError, match="deep.toml: nested too deeply"):
        load_config(deep)
    with pytest.raises(ValueError, match="deep.toml: nested too deeply"):
        read_config_file(deep)
    with pytest.raises(ConfigError, match="nested too deeply"):
        apply_overrides(preset("tiny"), ["optim.lr=" + "[" * 500 + "]" * 500])
    assert main(["--config", str(deep)]) == 2  # jepa train: bad input, before anything is written
    assert "deep.toml: nested too deeply" in capsys.readouterr().err
    run = tmp_path / "run"
    trainer = Trainer(fast_config(tmp_path), run_dir=run, quiet=True)
    assert trainer.run(max_steps=4) == "paused"
    trainer.close()
    (run / "config.toml").write_text(DEEP)
    assert jepa(["doctor", str(run), "--rules", "run"]) == 2  # unreadable: named, not a traceback with exit 1
    assert "config.toml" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- readers never refuse a writer


def test_a_reader_probing_the_lock_never_refuses_a_starting_writer(tmp_path):
    import fcntl
    import threading
    import time

    from jepa_core.run.lock import LOCK_NAME, RunLockedError

    (tmp_path / LOCK_NAME).touch()
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # a reader caught mid-probe, as lock_holder takes it for an instant
    threading.Timer(0.05, lambda: (fcntl.flock(fd, fcntl.LOCK_UN), os.close(fd))).start()
    lock = RunLock(tmp_path).acquire()  # waits the probe out instead of naming "pid ? on host ?"
    assert lock.held and lock_holder(tmp_path)["pid"] == os.getpid()
    # ... while a real writer is still refused, once the patience is spent, by name
    start = time.monotonic()
    with pytest.raises(RunLockedError, match=f"pid {os.getpid()}"):
        RunLock(tmp_path).acquire()
    assert time.monotonic() - start < 5
    lock.release()
    # and many probes racing many starts: never a refusal
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            lock_holder(tmp_path)

    reader = threading.Thread(target=probe)
    reader.start()
    try:
        for _ in range(200):
            RunLock(tmp_path).acquire().release()
    finally:
        stop.set()
        reader.join()


# ------------------------------------------------------------------- damaged checkpoints and meta.json, as doctor says


def test_doctor_names_damaged_checkpoints_and_a_garbage_meta_json(tmp_path, capsys):
    from jepa_core.workbench.doctor import doctor_main

    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "run", quiet=True)
    assert trainer.run(max_steps=6) == "paused"
    trainer.close()
    run = tmp_path / "run"
    assert doctor_main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "checkpoints: all" in out and "intact, newest at step 6" in out
    for path in (run / "checkpoints").glob("*.pt"):
        path.write_bytes(path.read_bytes()[:100])  # every checkpoint truncated
    assert doctor_main([str(run)]) == 1  # not "HEALTHY, exit 0": nothing left to resume from
    out = capsys.readouterr().out
    assert "checkpoints: NONE of" in out and "--resume would start again from step 0" in out
    assert "latest.pt is 100 bytes" in out
    (run / "meta.json").write_text("{not json")
    doctor_main([str(run)])
    assert f"run status: unknown ({run / 'meta.json'} is unreadable" in capsys.readouterr().out


def test_resume_lists_the_checkpoints_it_skipped_one_per_line(tmp_path, capsys):
    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "run", quiet=True)
    assert trainer.run(max_steps=6) == "paused"
    trainer.close()
    latest = tmp_path / "run" / "checkpoints" / "latest.pt"
    latest.write_bytes(latest.read_bytes()[:100])
    assert main(["--quiet", "--resume", str(tmp_path / "run"), "--until", "8"]) == 0
    err = capsys.readouterr().err
    assert "\\n" not in err  # newlines, not an escaped "\n"
    assert any(line.startswith("skipped ") and "latest.pt" in line for line in err.splitlines())
    assert any(line.startswith("resuming from ") for line in err.splitlines())


@pytest.mark.parametrize("damage", ["truncate", "scramble"])
def test_a_damaged_init_pt_never_blocks_a_resume_and_is_named(tmp_path, capsys, damage):
    from jepa_core.workbench.doctor import doctor_main

    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "run", quiet=True)
    assert trainer.run(max_steps=6) == "paused"
    trainer.close()
    init = tmp_path / "run" / "checkpoints" / "init.pt"
    assert (tmp_path / "run" / "checkpoints" / "init.pt.digest").is_file()  # written with a digest now
    raw = bytearray(init.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    else:  # the same size, bytes flipped in the middle of the tensor data: it would load, wrong
        middle = len(raw) // 2
        raw[middle:middle + 64] = bytes(255 - b for b in raw[middle:middle + 64])
    init.write_bytes(bytes(raw))
    assert doctor_main([str(tmp_path / "run")]) == 0  # the run can still resume: healthy, init.pt named
    assert "init.pt" in capsys.readouterr().out
    assert main(["--quiet", "--resume", str(tmp_path / "run"), "--until", "10"]) == 0
    err = capsys.readouterr().err
    assert "init.pt" in err and "measured from the resumed weights" in err


# ------------------------------------------------------------------------------- read-only places and a full disk


def test_an_unwritable_runs_folder_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    from jepa_core.config import save_config

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cfg = fast_config(tmp_path)
    cfg.logging.runs_dir = str(blocker / "runs")  # a path through a file: no run can be written there
    save_config(cfg, tmp_path / "cfg.toml")
    built = []
    monkeypatch.setattr("jepa_core.run.trainer.datasets_for", lambda *a: built.append(a))
    assert main(["--quiet", "--config", str(tmp_path / "cfg.toml")]) == 2
    err = capsys.readouterr().err
    assert f"logging.runs_dir {blocker / 'runs'}: cannot write there" in err
    assert built == []  # refused before the data was built


def test_resume_of_a_run_on_a_read_only_disk_is_refused_naming_it(tmp_path, capsys, monkeypatch):
    import errno
    import tempfile

    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "run", quiet=True)
    assert trainer.run(max_steps=6) == "paused"
    trainer.close()
    before = (tmp_path / "run" / "metrics.jsonl").read_bytes()

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)  # root passes permission checks; a read-only mount does not
    assert main(["--quiet", "--resume", str(tmp_path / "run")]) == 2
    assert f"run directory {tmp_path / 'run'}: cannot write there (Read-only file system)" in capsys.readouterr().err
    assert (tmp_path / "run" / "metrics.jsonl").read_bytes() == before


def test_a_disk_that_fills_up_mid_run_ends_it_as_crashed_in_one_line(tmp_path, capsys, monkeypatch):
    import errno
    import json

    from jepa_core.config import save_config
    from jepa_core.metrics.stream import JsonlWriter

    cfg = fast_config(tmp_path)
    cfg.logging.name = "full"
    save_config(cfg, tmp_path / "cfg.toml")
    write = JsonlWriter.write

    def filling(self, row):
        if row.get("step", 0) >= 12:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        return write(self, row)

    monkeypatch.setattr(JsonlWriter, "write", filling)
    assert main(["--quiet", "--config", str(tmp_path / "cfg.toml")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    run = tmp_path / "full"  # fast_config writes runs into tmp_path itself
    assert len(err) == 1 and "Traceback" not in err[0]
    assert f"cannot write {run / 'metrics.jsonl'}: No space left on device" in err[0]
    assert f"jepa train --resume {run}" in err[0]
    assert json.loads((run / "meta.json").read_text())["status"] == "crashed"
    for line in (run / "metrics.jsonl").read_text().splitlines():  # what was written stays strict JSON
        json.loads(line)
