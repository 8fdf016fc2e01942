"""gpu-check's planner and verdict (audit.gpucheck.cli): status, exit code, the time plan, crashes.

The planner tests replace ``run_step`` (no child processes) and the clock (a step "takes" the
seconds the test says); the crash and kill tests run real children that a ``sitecustomize``
stops at start-up, so ``run_step``'s own record of them is what is checked.
"""

import json
import os
import types
from pathlib import Path

import pytest

from audit.errors import AuditError
from audit.gpucheck import cli

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def result(step: str, checks=(), **extra) -> dict:
    """A step result as ``common.Result`` writes it; ``checks`` are ok flags."""
    return {"step": step, "checks": [{"name": f"{step} {i}", "value": 1, "limit": "x", "ok": ok}
                                     for i, ok in enumerate(checks)], "figures": {}, "notes": [], **extra}


def with_status(r: dict) -> dict:
    r["status"] = cli.status(r)
    return r


# ----- status ---------------------------------------------------------------------------------

@pytest.mark.parametrize("step", ["environment", "correctness", "syncs", "dag"])
def test_a_failed_check_fails_the_steps_that_gate_or_check(step):
    assert cli.status(result(step, [True, False, True])) == "fail"
    assert cli.status(result(step, [True, True])) == "pass"


@pytest.mark.parametrize("step", ["memory", "speed"])
def test_a_missed_memory_band_or_speed_target_is_off_target_not_fail(step):
    assert cli.status(result(step, [True, False])) == "off-target"
    assert cli.status(result(step, [True])) == "pass"


def test_status_precedence_error_then_skipped_then_checks_then_incomplete():
    # an error outranks everything the step measured before it broke
    assert cli.status(result("syncs", [False], error="exit 1: boom", incomplete=True)) == "error"
    assert cli.status(result("memory", [True], errors=["paper-wt2: RuntimeError: x"])) == "error"
    assert cli.status(result("memory", [True], errors=[])) == "pass"   # an empty list is no error
    assert cli.status(result("dag", [], skipped="snakemake is not installed")) == "skipped"
    # a failed check is reported even when the step also ran out of time
    assert cli.status(result("correctness", [False], incomplete=True)) == "fail"
    assert cli.status(result("speed", [False], incomplete=True)) == "off-target"
    assert cli.status(result("correctness", [True], incomplete=True)) == "incomplete"
    assert cli.status(result("environment", [])) == "pass"


# ----- exit code ------------------------------------------------------------------------------

def passing() -> list[dict]:
    return [with_status(result(s, [True])) for s in cli.STEPS]


def test_exit_0_when_everything_passes_or_only_memory_and_speed_miss():
    assert cli.exit_code(passing()) == 0
    results = passing()
    results[3] = with_status(result("memory", [True, False, False]))
    results[4] = with_status(result("speed", [False], incomplete=True))
    assert [r["status"] for r in results[3:5]] == ["off-target", "off-target"]
    assert cli.exit_code(results) == 0


def test_exit_0_when_a_later_step_is_skipped_or_incomplete():
    results = passing()
    results[5] = with_status(result("dag", [True], incomplete=True))
    results[2] = with_status(result("syncs", [], skipped="needs at least 20 s, 3 s left of --minutes 1"))
    assert cli.exit_code(results) == 0


@pytest.mark.parametrize("index, replacement", [
    (0, result("environment", [False])),                                     # no CUDA device
    (1, result("correctness", [True, False])),                               # a wrong log-prob
    (1, result("correctness", [True], incomplete=True)),                     # not checked to the end
    (1, result("correctness", [], skipped="needs at least 30 s, 4 s left")),  # never ran
    (2, result("syncs", [True, False])),                                     # over the sync budget
    (5, result("dag", [False])),                                             # Snakemake failed
    (3, result("memory", [], error="exit 1: Traceback ...")),                 # any crash
    (4, result("speed", [True], errors=["one softmax run: CUDA error"])),
])
def test_exit_1_when_a_gate_does_not_pass_a_checked_step_fails_or_any_step_errs(index, replacement):
    results = passing()
    results[index] = with_status(replacement)
    assert cli.exit_code(results) == 1


def test_exit_1_when_a_gating_step_is_missing():
    assert cli.exit_code([r for r in passing() if r["step"] != "correctness"]) == 1


# ----- the planner ----------------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def time(self):
        return self.now


@pytest.fixture
def planner(monkeypatch, tmp_path):
    """plan_and_run with a fake clock and a fake run_step: ``takes`` (step -> seconds) and
    ``gives`` (step -> result fields); returns (run(minutes, names) -> results, calls)."""
    clock = Clock()
    monkeypatch.setattr(cli, "time", types.SimpleNamespace(time=clock.time))
    calls, takes, gives, kills = [], {}, {}, []

    def fake_run_step(name, budget, out, kill_after=None):
        calls.append((name, budget, clock.now))
        kills.append(kill_after)
        clock.now += takes.get(name, 1.0)
        r = {**result(name, [True]), **gives.get(name, {})}
        r["budget"] = round(budget)
        return with_status(r)

    monkeypatch.setattr(cli, "run_step", fake_run_step)

    def run(minutes, names=tuple(cli.STEPS)):
        return cli.plan_and_run(tmp_path, minutes, list(names))

    return types.SimpleNamespace(run=run, calls=calls, takes=takes, gives=gives, clock=clock, kills=kills)


def test_a_step_that_cannot_fit_is_skipped_with_the_seconds_it_needs_and_has(planner):
    # --minutes 1: 60 s less 5 for the report; environment takes 5 s, correctness (50 s left:
    # its minimum 30 and WRAP_UP 20) 30 s, which leaves 20 s: every later step needs more (its
    # minimum and WRAP_UP: syncs 40, memory 80, speed 80, dag 140)
    planner.takes.update(environment=5, correctness=30)
    results = planner.run(1)
    assert [c[0] for c in planner.calls] == ["environment", "correctness"]
    assert [r["step"] for r in results] == list(cli.STEPS)
    for r, need in zip(results[2:], (40, 80, 80, 140)):
        assert r["status"] == "skipped"
        assert r["skipped"] == f"needs at least {need} s, 20 s left of --minutes 1"
    assert cli.exit_code(results) == 0   # both gates passed; skipping is said, not failed


def test_no_time_for_the_first_step_skips_everything_and_fails(planner):
    results = planner.run(0.05)       # 3 s, less 5 for the report
    assert planner.calls == []
    assert [r["status"] for r in results] == ["skipped"] * len(cli.STEPS)
    assert results[0]["skipped"] == "needs at least 25 s, 0 s left of --minutes 0.05"
    assert cli.exit_code(results) == 1


@pytest.mark.parametrize("simulated, expected", [(False, 60), (True, 150)])
def test_budgets_are_share_times_the_expected_cost_of_the_device_found(planner, simulated, expected):
    planner.takes.update(environment=10)
    planner.gives["environment"] = {"simulated": simulated}
    planner.run(8, ["environment", "correctness"])
    (_, env_budget, env_start), (_, budget, start) = planner.calls
    # environment: 8 min = 480 s, less 5, less the 60 s grace: 415 s, capped at 2 x 15 s
    assert env_budget == 2 * 15
    # correctness, after environment says which device: 2 x its expected seconds there
    assert budget == 2 * expected == cli.SHARE * cli.STEPS["correctness"][1 if simulated else 0]
    assert budget <= (env_start + 480 - 5) - start - cli.GRACE


def test_a_budget_ends_a_grace_before_the_deadline_when_there_is_room(planner):
    # --minutes 3: environment takes 10 s, so correctness has 180 - 10 - 5 = 165 s left; its
    # budget stops GRACE (60) s short of that, 105 s, below 2 x 60 = 120, so that the kill at
    # budget + GRACE still comes by the deadline
    planner.takes.update(environment=10)
    planner.run(3, ["environment", "correctness"])
    assert planner.calls[1][1] == pytest.approx(165 - cli.GRACE) == pytest.approx(105)


def test_a_budget_never_runs_past_the_time_left(planner):
    # --minutes 2: environment takes 50 s, so correctness has 120 - 50 - 5 = 65 s left, less
    # than its minimum (30) plus the grace (60): its budget ends WRAP_UP (20) s before the
    # deadline, 45 s, not 2 x 60 = 120, and it is killed at the deadline, no grace past --minutes
    planner.takes.update(environment=50)
    planner.run(2, ["environment", "correctness"])
    assert planner.calls[1][1] == pytest.approx(65 - cli.WRAP_UP) == pytest.approx(45)
    assert planner.kills[1] == pytest.approx(65)
    assert planner.kills[0] == pytest.approx(2 * 15 + cli.GRACE)   # room left: the full grace


@pytest.mark.parametrize("taken", [0, 10, 200, 290, 330, 350, 400, 430])
def test_every_step_has_time_to_wrap_up_before_it_is_killed(planner, taken):
    """However little the earlier steps left, a step that starts is killed no sooner than WRAP_UP
    after its budget (the DAG step, given all 163 s left and killed at them, ended in an error
    instead of its result) and never past --minutes."""
    planner.takes.update(environment=1, correctness=taken)
    began = planner.clock.now
    planner.run(8)
    assert len(planner.calls) >= 2
    for (name, budget, start), kill in zip(planner.calls, planner.kills):
        assert kill - budget >= cli.WRAP_UP, name
        assert start - began + kill <= 480 - 5 + 1e-9, name


def test_a_crashed_step_is_error_and_fails_the_run(planner):
    planner.gives["syncs"] = {"checks": [], "error": "exit 1: Traceback (most recent call last): ..."}
    results = planner.run(8)
    by = {r["step"]: r for r in results}
    assert by["syncs"]["status"] == "error"
    assert [c[0] for c in planner.calls] == list(cli.STEPS)   # the others still ran
    assert cli.exit_code(results) == 1


def test_memory_and_speed_off_target_do_not_fail_the_run(planner):
    for step in ("memory", "speed"):
        planner.gives[step] = {"checks": [{"name": "n", "value": 2.9, "limit": "[0.8, 1.25]", "ok": False}]}
    results = planner.run(8)
    assert [r["status"] for r in results] == ["pass", "pass", "pass", "off-target", "off-target", "pass"]
    assert cli.exit_code(results) == 0


# ----- main: the exit status it returns, and its one-line errors -------------------------------

def test_main_returns_the_exit_code_and_writes_both_reports(planner, tmp_path):
    planner.gives["dag"] = {"checks": [{"name": "Snakemake gpu4 exits 0", "value": 1, "limit": "0", "ok": False}]}
    assert cli.main(["--out", str(tmp_path / "o"), "--minutes", "8"]) == 1
    assert (tmp_path / "o" / "gpu-check.json").is_file()
    assert "Snakemake gpu4 exits 0" in (tmp_path / "o" / "gpu-check.md").read_text()


def test_main_without_both_gates_fails_only_on_error_or_fail(planner, tmp_path):
    planner.gives["memory"] = {"checks": [{"name": "m", "value": 3, "limit": "x", "ok": False}]}
    assert cli.main(["--out", str(tmp_path / "a"), "--steps", "memory"]) == 0
    planner.gives["syncs"] = {"checks": [{"name": "s", "value": 1, "limit": "<= 0.02", "ok": False}]}
    assert cli.main(["--out", str(tmp_path / "b"), "--steps", "syncs,memory"]) == 1


def test_main_names_an_unknown_step_and_a_bad_minutes(tmp_path):
    with pytest.raises(AuditError, match="unknown step 'speeed'"):
        cli.main(["--out", str(tmp_path), "--steps", "environment,speeed"])
    with pytest.raises(AuditError, match="--minutes must be positive, got 0"):
        cli.main(["--out", str(tmp_path), "--minutes", "0"])


# ----- run_step with real children that crash or hang -----------------------------------------

def child_env(monkeypatch, tmp_path, code: str) -> None:
    """Children of ``python -m audit gpu-check --step`` run ``code`` at start-up."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys, os, time\nif '--step' in sys.orig_argv:\n" + code)
    path = [str(site), str(REPO), os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, path)))
    monkeypatch.chdir(REPO)


def test_run_step_records_a_crashed_child_with_its_exit_code_and_log(monkeypatch, tmp_path):
    child_env(monkeypatch, tmp_path, "    print('boom: the driver fell over', flush=True)\n    os._exit(3)\n")
    (tmp_path / "out" / "steps").mkdir(parents=True)
    # a stale result from an earlier run must not be taken for this one's
    (tmp_path / "out" / "steps" / "syncs.json").write_text('{"step": "syncs", "checks": [], "figures": {}}')
    r = cli.run_step("syncs", 30, tmp_path / "out")
    assert r["status"] == "error"
    assert r["error"].startswith("exit 3: ") and "boom: the driver fell over" in r["error"]
    assert r["budget"] == 30
    gates = [with_status(result("environment", [True])), with_status(result("correctness", [True]))]
    assert cli.exit_code(gates + [r]) == 1


def test_run_step_takes_no_result_from_a_child_that_dies_on_the_way_out(monkeypatch, tmp_path):
    # environment passes and writes its result, then the process dies at exit (a driver's
    # teardown that crashes): the result is not taken for a clean one
    from support import simulated_python

    sim = simulated_python.install(tmp_path / "sim")
    child_env(monkeypatch, tmp_path, "    import atexit, runpy\n"
              f"    runpy.run_path({str(sim / 'sitecustomize.py')!r})\n"
              "    atexit.register(os._exit, 139)\n")
    (tmp_path / "out" / "steps").mkdir(parents=True)
    r = cli.run_step("environment", 30, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "steps" / "environment.json").read_text())["checks"][0]["ok"]
    assert r["status"] == "error" and r["error"].startswith("exit 139")


def test_run_step_kills_a_child_that_runs_past_its_budget_and_grace(monkeypatch, tmp_path):
    child_env(monkeypatch, tmp_path, "    time.sleep(60)\n")
    monkeypatch.setattr(cli, "GRACE", 1)
    (tmp_path / "out" / "steps").mkdir(parents=True)
    r = cli.run_step("dag", 1, tmp_path / "out")
    assert r["status"] == "error" and r["error"] == "killed after its budget"
    assert 2 <= r["seconds"] < 30


def test_main_with_a_real_crashing_step_exits_1_and_reports_it(monkeypatch, tmp_path):
    # environment runs for real on the simulated device; correctness's child dies at start-up
    from support import simulated_python

    sim = simulated_python.install(tmp_path / "sim")
    child_env(monkeypatch, tmp_path, "    if 'correctness' in sys.orig_argv:\n        os._exit(7)\n"
              "    import runpy\n"
              f"    runpy.run_path({str(sim / 'sitecustomize.py')!r})\n")
    assert cli.main(["--out", str(tmp_path / "o"), "--steps", "environment,correctness", "--minutes", "2"]) == 1
    md = (tmp_path / "o" / "gpu-check.md").read_text()
    assert "| environment | pass |" in md and "| correctness | error |" in md
    assert "- correctness: exit 7" in md
