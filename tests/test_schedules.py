import pytest

from jepa_core.method.schedules import cosine_schedule, warmup_cosine


def test_warmup_cosine_endpoints_and_continuity():
    kw = dict(total_steps=100, warmup_steps=10, base=1.0, final=0.1, start=0.0)
    assert warmup_cosine(0, **kw) == pytest.approx(0.0)
    assert warmup_cosine(5, **kw) == pytest.approx(0.5)
    assert warmup_cosine(10, **kw) == pytest.approx(1.0)
    # continuous around the end of warmup: neighbours within one warmup increment
    assert abs(warmup_cosine(9, **kw) - warmup_cosine(10, **kw)) <= 0.1 + 1e-12
    assert abs(warmup_cosine(11, **kw) - warmup_cosine(10, **kw)) < 0.01
    assert warmup_cosine(55, **kw) == pytest.approx(0.55)  # cosine midpoint
    assert warmup_cosine(100, **kw) == pytest.approx(0.1)
    assert warmup_cosine(500, **kw) == pytest.approx(0.1)
    decay = [warmup_cosine(s, **kw) for s in range(10, 101)]
    assert all(b <= a for a, b in zip(decay, decay[1:]))


def test_warmup_cosine_no_warmup_and_errors():
    assert warmup_cosine(0, 10, 0, 2.0, 0.0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_cosine(0, 10, 20, 1.0, 0.0)
    with pytest.raises(ValueError, match="step"):
        warmup_cosine(-1, 10, 2, 1.0, 0.0)


def test_cosine_schedule_endpoints():
    assert cosine_schedule(0, 50, 0.04, 0.4) == pytest.approx(0.04)
    assert cosine_schedule(25, 50, 0.04, 0.4) == pytest.approx(0.22)
    assert cosine_schedule(50, 50, 0.04, 0.4) == pytest.approx(0.4)
    assert cosine_schedule(80, 50, 0.04, 0.4) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="total_steps"):
        cosine_schedule(0, 0, 0.0, 1.0)


def test_lr_schedule_sums_the_area_under_the_schedule_the_same_at_any_stretch():
    from jepa_core.config.sections import OptimConfig
    from jepa_core.method.schedules import LrSchedule

    optim = OptimConfig(steps=100, lr=1e-3, start_lr=1e-5, final_lr=1e-6, warmup_steps=20)
    schedule = LrSchedule.of(optim)
    assert (schedule.lr, schedule.start_lr, schedule.final_lr, schedule.warmup_steps, schedule.steps) == (
        1e-3, 1e-5, 1e-6, 20, 100)
    assert schedule.at(20) == warmup_cosine(20, 100, 20, 1e-3, 1e-6, 1e-5) == 1e-3
    # the warm-up's area is a trapezoid; the sum over the updates is within one update's lr of the area
    assert schedule.summed(0) == 0.0 and schedule.summed(20) == pytest.approx(20 * (1e-5 + 1e-3) / 2)
    assert abs(schedule.summed(57) - sum(schedule.at(i) for i in range(57))) < 1e-3
    # past the run's end the schedule holds its final lr
    assert schedule.summed(130) == pytest.approx(schedule.summed(100) + 30 * 1e-6)
    # the same schedule ten times slower: every ratio of two sums is the same (what a rule compares)
    slow = LrSchedule(1e-3, 1e-5, 1e-6, 200, 1000)
    for before, after in ((5, 15), (20, 60), (57, 99), (90, 130)):
        assert slow.summed(10 * after) / slow.summed(10 * before) == pytest.approx(
            schedule.summed(after) / schedule.summed(before), rel=1e-12)
    assert schedule == LrSchedule.of(optim)
