"""Tests of the Dirichlet synthetic study (audit.synthetic, rules/synthetic.smk).

Golden values come from independent computations in the tests: numpy's SVD for ranks,
scipy.stats.entropy for KL and entropy, scipy.stats.beta for the Dirichlet marginals.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import log_softmax

from audit.synthetic import cli, fit, plan
from audit.config import check_study
from audit.errors import AuditError

REPO = Path(__file__).resolve().parents[2]
F32_EPS = float(np.finfo(np.float32).eps)


def numpy_press_rank(a):
    """Press rank from numpy's SVD: singular values above 0.5 sqrt(m + n + 1) s_max eps32."""
    sv = np.linalg.svd(np.asarray(a, dtype=np.float64), compute_uv=False)
    m, n = a.shape
    return int(np.sum(sv > 0.5 * np.sqrt(m + n + 1) * sv[0] * F32_EPS))


def tiny_settings(head="softmax", d=3, alpha=0.1, seed=1, **over):
    settings = {"study": "t", "head": head, "registry_head": head, "options": {}, "d": d, "alpha": alpha,
                "seed": seed, "contexts": 60, "outcomes": 40, "steps": 60, "lr": 0.1,
                "decoder_bias": True, "device": "cpu", "threads": 1}
    return {**settings, **over}


def quiet(*_):
    pass


# ----- targets -----------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.01, 0.1, 1.0])
def test_targets_are_normalised_finite_and_beta_distributed(alpha):
    """H0: each component of a Dirichlet(alpha 1_M) draw is Beta(alpha, (M - 1) alpha); a KS
    test on 2,000 x 1 components (seeded, so deterministic) must not reject at 1e-3."""
    log_p = fit.sample_log_targets(2000, 50, alpha, np.random.default_rng(3))
    assert log_p.shape == (2000, 50) and np.isfinite(log_p).all()
    assert np.abs(np.logaddexp.reduce(log_p, axis=1)).max() < 1e-12
    column = np.exp(log_p[:, 7])
    assert stats.kstest(column, stats.beta(alpha, 49 * alpha).cdf).pvalue > 1e-3


def test_tiny_alpha_stays_finite_where_exp_underflows():
    log_p = fit.sample_log_targets(200, 100, 0.01, np.random.default_rng(0))
    assert np.isfinite(log_p).all()
    assert (log_p < -745).any()  # exp underflows float64 there: a float sampler would give log(0)


def test_same_seed_same_draw_and_seed_changes_it():
    a = fit.sample_log_targets(5, 6, 0.1, np.random.default_rng(4))
    b = fit.sample_log_targets(5, 6, 0.1, np.random.default_rng(4))
    c = fit.sample_log_targets(5, 6, 0.1, np.random.default_rng(5))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_true_log_p_ranks_of_constructed_cases():
    # log_softmax(A B^T) = A B^T - lse 1^T: rank r + 1; a Dirichlet draw's log-P is full rank
    rng = np.random.default_rng(0)
    low = log_softmax(rng.standard_normal((80, 4)) @ rng.standard_normal((4, 50)), axis=1)
    assert fit.rank_metrics(low)["press_rank"] == numpy_press_rank(low) == 5
    full = fit.sample_log_targets(80, 50, 0.1, rng)
    ranks = fit.rank_metrics(full, prefix="true_")
    assert ranks["true_press_rank"] == numpy_press_rank(full) == 50
    sv = np.linalg.svd(full, compute_uv=False)
    energy = np.cumsum(sv ** 2) / np.sum(sv ** 2)
    assert ranks["true_erank_1e-3"] == int(np.argmax(energy >= 1 - 1e-3)) + 1


# ----- metrics -----------------------------------------------------------------------------
def test_perfect_fit_and_kl_identity():
    rng = np.random.default_rng(1)
    log_p = fit.sample_log_targets(30, 20, 0.1, rng)
    perfect = fit.fit_metrics(log_p, log_p)
    assert perfect["mode_match"] == 1.0 and abs(perfect["kl"]) < 1e-12
    log_q = log_softmax(rng.standard_normal((30, 20)), axis=1)
    m = fit.fit_metrics(log_q, log_p)
    p, q = np.exp(log_p), np.exp(log_q)
    kl_rows = [stats.entropy(p[i], q[i]) for i in range(30)]   # scipy's KL, independent code
    h_rows = [stats.entropy(p[i]) for i in range(30)]
    assert m["kl"] >= 0 and m["kl"] == pytest.approx(np.mean(kl_rows), rel=1e-9)
    assert m["entropy"] == pytest.approx(np.mean(h_rows), rel=1e-9)
    assert m["kl"] == pytest.approx(m["ce"] - m["entropy"], rel=1e-9)
    assert m["mode_match"] == np.mean(q.argmax(1) == p.argmax(1))


# ----- fits --------------------------------------------------------------------------------
@pytest.mark.parametrize("bias, extra", [(True, 2), (False, 1)])
def test_softmax_fit_log_p_rank_is_d_plus_bias_plus_one(bias, extra):
    record = fit.fit(tiny_settings(decoder_bias=bias), log=quiet)
    assert record["status"] == "ok"
    assert record["press_rank"] == 3 + extra          # generically exactly d + 2 with the bias
    assert record["true_press_rank"] == 40            # full rank: min(N, M)
    assert record["kl"] >= 0 and 0 <= record["mode_match"] <= 1
    assert record["kl_curve"][-1][1] < record["kl_curve"][0][1]  # Adam made progress


def test_fit_is_deterministic_per_seed():
    a = fit.fit(tiny_settings(head="sigsoftmax"), log=quiet)
    b = fit.fit(tiny_settings(head="sigsoftmax"), log=quiet)
    c = fit.fit(tiny_settings(head="sigsoftmax", seed=2), log=quiet)
    a.pop("seconds"), b.pop("seconds"), c.pop("seconds")
    assert a == b and a["kl"] != c["kl"]


def test_mixture_head_fits_with_d_in_equal_to_d():
    record = fit.fit(tiny_settings(head="mos", options={"experts": 3, "dropoutl": 0.0}), log=quiet)
    assert record["status"] == "ok" and record["press_rank"] > 3 + 2


# ----- config, table, figure ---------------------------------------------------------------
def tiny_config(tmp_path=None, heads=None):
    section = {"heads": heads or [{"name": "softmax"}, {"name": "sig", "head": "sigsoftmax"}],
               "d": [2, 4], "alpha": [0.01, 1], "seeds": [1, 2], "contexts": 24, "outcomes": 12,
               "steps": 15}
    return check_study({"study": "tiny", "seeds": [1], "heads": [{"name": "softmax"}], "synthetic": section})


def test_jobs_skip_unregistered_heads_and_settings_round_trip():
    config = tiny_config(heads=[{"name": "softmax"}, {"name": "not-a-head"}])
    kept, skipped = plan.synthetic_heads(config)
    assert [e["name"] for e in kept] == ["softmax"] and skipped == ["not-a-head"]
    jobs = plan.fit_jobs(config)
    assert len(jobs) == 1 * 2 * 2 * 2 and ("softmax", 2, "0.01", 1) in jobs
    s = plan.fit_settings(config, "softmax", 2, "0.01", 1)
    assert s["alpha"] == 0.01 and s["contexts"] == 24 and s["lr"] == 0.1  # schema default
    with pytest.raises(AuditError, match="alpha 0.5"):
        plan.fit_settings(config, "softmax", 2, "0.5", 1)
    with pytest.raises(AuditError, match="not-a-head"):
        cli.main(["fit", "--settings", json.dumps({**s, "registry_head": "not-a-head"}),
                        "--out", "unused.json"])


def test_table_and_figure_commands_on_a_tiny_sweep(tmp_path):
    config = tiny_config()
    paths = []
    for head, d, alpha, seed in plan.fit_jobs(config):
        path = tmp_path / f"{head}-{d}-{alpha}-{seed}.json"
        settings = json.dumps(plan.fit_settings(config, head, d, alpha, seed))
        assert cli.main(["fit", "--settings", settings, "--out", str(path)]) == 0
        paths.append(str(path))
    table_path, summary_path = tmp_path / "synthetic.csv", tmp_path / "summary.csv"
    cli.main(["table", "--inputs", *paths, "--out", str(table_path), "--summary-out", str(summary_path)])
    table = pd.read_csv(table_path)
    assert len(table) == 16 and set(table["head"]) == {"softmax", "sig"}
    assert (table["status"] == "ok").all() and (table["true_press_rank"] == 12).all()
    softmax = table[table["head"] == "softmax"]
    assert (softmax["press_rank"] == softmax["d"] + 2).all()
    summary = pd.read_csv(summary_path)
    assert len(summary) == 8 and (summary["kl_count"] == 2).all()
    row = summary[(summary["head"] == "sig") & (summary["d"] == 4) & (summary["alpha"] == 1.0)].iloc[0]
    part = table[(table["head"] == "sig") & (table["d"] == 4) & (table["alpha"] == 1.0)]
    assert row["kl_mean"] == pytest.approx(part["kl"].mean()) and row["kl_std"] == pytest.approx(part["kl"].std())
    svgs = []
    for attempt in range(2):
        out = tmp_path / f"mode_{attempt}.svg"
        cli.main(["figure", "--table", str(table_path), "--metric", "mode_match", "--out", str(out)])
        svgs.append(out.read_bytes())
    assert svgs[0] == svgs[1] and b"alpha = 0.01" in svgs[0] and b"sig (n=2)" in svgs[0]
    cli.main(["figure", "--table", str(table_path), "--metric", "kl", "--out", str(tmp_path / "kl.svg")])
    assert (tmp_path / "kl.svg").read_text().startswith("<?xml")


def test_rules_define_jobs_only_with_a_synthetic_section(tmp_path):
    """A dry run of rules/common.smk + rules/synthetic.smk: 16 fits with the section, no rule without."""
    (tmp_path / "Snakefile").write_text(textwrap.dedent(f"""\
        include: "{REPO}/rules/common.smk"
        include: "{REPO}/rules/synthetic.smk"

        rule all:
            input:
                synthetic_targets(),
        """))
    config = tiny_config()
    with_section = {k: config[k] for k in ("study", "seeds", "heads", "synthetic")}
    (tmp_path / "with.yaml").write_text(json.dumps(with_section))
    (tmp_path / "without.yaml").write_text(json.dumps({"study": "tiny", "seeds": [1], "heads": [{"name": "softmax"}]}))
    run = lambda cfg: subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", cfg], cwd=tmp_path,
                                     capture_output=True, text=True, timeout=120)
    proc = run("with.yaml")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert any(line.split() == ["synthetic_fit", "16"] for line in out.splitlines())  # job stats row
    proc = run("without.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "synthetic_fit" not in proc.stdout + proc.stderr


def test_adam_matches_torch_adam_bitwise():
    """The hand-written Adam (no torch._dynamo import) against torch.optim.Adam, two groups."""
    import torch

    torch.manual_seed(0)
    ours = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(4))]
    ref = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    opt_ours = fit.Adam([{"params": [ours[0]], "lr": 0.1}, {"params": [ours[1]], "lr": 0.02}])
    opt_ref = torch.optim.Adam([{"params": [ref[0]], "lr": 0.1}, {"params": [ref[1]], "lr": 0.02}], foreach=False)
    for _ in range(25):
        for (p, q), opt in ((ours, opt_ours), (ref, opt_ref)):
            p.grad = q.grad = None
            ((p.sin() ** 2).sum() + (q ** 3).sum()).backward()
            opt.step()
    assert torch.equal(ours[0], ref[0]) and torch.equal(ours[1], ref[1])


# ----- the simulated CUDA device (tests/support/fake_cuda.py) ------------------------------
@pytest.mark.parametrize("head, options", [("softmax", {}), ("mos", {"experts": 3, "dropoutl": 0.0})])
def test_fit_on_the_device_reads_the_host_once_per_50_steps(head, options, tmp_path, monkeypatch):
    """Extra steps cost at most one host sync per 50 (the divergence check and the KL curve stay
    on the device); the record equals the CPU fit's (the simulation computes on the CPU)."""
    from support.fake_cuda import simulated_cuda

    monkeypatch.setenv("AUDIT_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr("audit.device._HELD", None)
    syncs, records = {}, {}
    for steps in (50, 300):
        settings = tiny_settings(head=head, options=options, steps=steps, device="cuda")
        with simulated_cuda() as sim:
            records[steps] = fit.fit(settings, log=quiet)
            record = sim.take()
        assert not record.mixed and not record.cpu_generator, record
        syncs[steps] = record.n_syncs
    assert records[300]["status"] == "ok"
    assert syncs[300] - syncs[50] <= 250 / 50, syncs
    cpu = fit.fit(tiny_settings(head=head, options=options, steps=300), log=quiet)
    for record in (records[300], cpu):
        record.pop("seconds"), record["settings"].pop("device")
    assert records[300] == cpu


def test_fit_on_the_device_fails_at_the_first_non_finite_step(tmp_path, monkeypatch):
    """A loss that turns non-finite at step 7 fails the fit there, as on the CPU, with the KL curve
    cut before it, though the device reads its check only every 50 steps."""
    from support.fake_cuda import simulated_cuda

    monkeypatch.setenv("AUDIT_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr("audit.device._HELD", None)
    forward = fit.ContextModel.forward
    calls = []

    def poisoned(self):
        calls.append(1)
        out = forward(self)
        return out * float("nan") if len(calls) >= 7 else out

    monkeypatch.setattr(fit.ContextModel, "forward", poisoned)
    settings = tiny_settings(steps=120, device="cuda")
    with simulated_cuda():
        device = fit.fit(settings, log=quiet)
    calls.clear()
    cpu = fit.fit(tiny_settings(steps=120), log=quiet)
    assert device["status"] == cpu["status"] == "failed"
    assert device["error"] == cpu["error"] == "non-finite loss at step 7"
    assert device["kl_curve"] == cpu["kl_curve"] and [s for s, _ in cpu["kl_curve"]] == [6]
