"""The runs table: one row per run, failed runs kept, grid arms with their grid columns."""

import json

import pandas as pd
import pytest

from audit.errors import AuditError
from audit.stats.runs_table import BASE_COLUMNS, collect


def _run(root, head, seed, status="ok", settings=None, ppl=100.0):
    run = root / "ptb" / head / str(seed)
    run.mkdir(parents=True)
    metrics = {"status": status, "error": "" if status == "ok" else "Divergence: loss nan", "study": "t",
               "corpus": "ptb", "head": head, "seed": seed, "n_params": 10, "train_ppl": ppl + 5,
               "valid_ppl": ppl + 1, "settings": settings or {}}
    (run / "metrics.json").write_text(json.dumps(metrics))
    result = {"test_ppl": ppl if status == "ok" else float("nan"), "press_rank": 34, "wordsim": {"EN-MC-30": 0.25}}
    (run / "eval.json").write_text(json.dumps(result))
    pd.DataFrame([{"benchmark": "EN-MC-30", "word1": "a", "word2": "b", "gold": 1.0, "cosine": 0.5}]).to_csv(
        run / "wordsim_pairs.csv", index=False)
    return run


def test_grid_arms_get_their_group_and_grid_values(tmp_path):
    point = {"arm_group": "gss", "grid_point": {"c": -1.5, "k": 2.5}}
    dirs = [_run(tmp_path, "softmax", 2), _run(tmp_path, "softmax", 1, "failed"),
            _run(tmp_path, "gss_c-1.5_k2.5", 1, settings=point, ppl=90.0)]
    runs, pairs = collect(dirs)
    assert list(runs.columns[:len(BASE_COLUMNS)]) == BASE_COLUMNS
    assert list(runs.columns[len(BASE_COLUMNS):]) == ["body", "arm_group", "grid_c", "grid_k", "wordsim_EN-MC-30"]
    assert list(runs["head"]) == ["gss_c-1.5_k2.5", "softmax", "softmax"] and list(runs["seed"]) == [1, 1, 2]
    gss, failed = runs.iloc[0], runs.iloc[1]
    assert (gss.arm_group, gss.grid_c, gss.grid_k, gss.test_ppl, gss.train_ppl) == ("gss", -1.5, 2.5, 90.0, 95.0)
    assert failed.arm_group == "softmax" and pd.isna(failed.grid_c) and failed.status == "failed"
    assert failed.error.startswith("Divergence")
    assert len(pairs) == 3 and set(pairs["head"]) == {"softmax", "gss_c-1.5_k2.5"}


def test_a_run_without_a_status_is_an_error_not_a_success(tmp_path):
    run = _run(tmp_path, "softmax", 1)
    metrics = json.loads((run / "metrics.json").read_text())
    del metrics["status"]
    (run / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(AuditError, match=r"metrics.json: key 'status' is None; expected 'ok' or 'failed'"):
        collect([run])


def test_sentence_files_are_gathered_by_run(tmp_path):
    import numpy as np

    from audit.stats.runs_table import main
    from audit.stats import multiboot

    dirs = [_run(tmp_path, "softmax", 1), _run(tmp_path, "mos", 2)]
    for i, run in enumerate(dirs):
        np.savez(run / "sentences.npz", nll=np.array([1.5, 2.5 + i]), tokens=np.array([2, 3]))
    out = tmp_path / "sentences.npz"
    assert main(["--runs", *map(str, dirs), "--out", str(tmp_path / "runs.csv"),
                 "--pairs-out", str(tmp_path / "pairs.csv"), "--sentences-out", str(out)]) == 0
    got = multiboot.load(out)
    assert sorted(got.nll) == [("ptb", "mos", "2"), ("ptb", "softmax", "1")]
    assert got.nll[("ptb", "mos", "2")].tolist() == [1.5, 3.5] and got.tokens[("ptb", "softmax", "1")].tolist() == [2, 3]
    (dirs[0] / "sentences.npz").unlink()
    with pytest.raises(AuditError, match=r"softmax/1/sentences.npz: re-evaluate the run"):
        main(["--runs", *map(str, dirs), "--out", str(tmp_path / "r.csv"), "--pairs-out", str(tmp_path / "p.csv"),
              "--sentences-out", str(tmp_path / "s.npz")])
    assert not (tmp_path / "r.csv").exists() and not (tmp_path / "s.npz").exists()   # nothing half-written


def test_the_measurements_since_2021_become_columns(tmp_path):
    run = _run(tmp_path, "softmax", 1)
    result = json.loads((run / "eval.json").read_text())
    result.update(unargmaxable=0, argmax_unresolved=3, argmax_seconds=1.5, gradient_share=0.25,
                  gradient_norm_share=0.5, gradient_share_tokens=100, hidden_gap_dim=400,
                  hidden_gap_ratio=float("inf"), hidden_gap_ok=True, unargmaxable_box100=0,
                  argmax_unresolved_box100=1, argmax_seconds_box100=0.5, hidden_gap_expected=400,
                  hidden_gap_miss=0, hidden_gap_residual=2e-7)
    (run / "eval.json").write_text(json.dumps(result))
    mos = _run(tmp_path, "mos", 1)
    result = json.loads((mos / "eval.json").read_text())
    result.update(unargmaxable=None, argmax_argmaxable=7, argmax_unresolved=93, argmax_seconds=2.5,
                  argmax_note="lower bound from a witness search: at least 7 argmaxable, 93 unresolved",
                  gradient_share=0.75)
    (mos / "eval.json").write_text(json.dumps(result))
    runs = collect([run, mos])[0].set_index("head")
    assert runs.loc["softmax", "unargmaxable"] == 0 and runs.loc["softmax", "argmax_unresolved"] == 3
    assert runs.loc["softmax", "hidden_gap_dim"] == 400 and runs.loc["softmax", "hidden_gap_ok"] == True  # noqa: E712
    assert runs.loc["softmax", "hidden_gap_ratio"] == float("inf")
    # the authors' box (Grivas et al. 2022) beside the body's, and the hidden-gap control's parts
    assert runs.loc["softmax", "unargmaxable_box100"] == 0 and runs.loc["softmax", "argmax_unresolved_box100"] == 1
    assert runs.loc["softmax", "argmax_seconds_box100"] == 0.5 and runs.loc["softmax", "hidden_gap_expected"] == 400
    assert runs.loc["softmax", "hidden_gap_miss"] == 0 and runs.loc["softmax", "hidden_gap_residual"] == 2e-7
    assert pd.isna(runs.loc["mos", "unargmaxable_box100"])
    assert pd.isna(runs.loc["mos", "unargmaxable"]) and runs.loc["mos", "argmax_note"].startswith("lower bound")
    assert runs.loc["mos", "argmax_argmaxable"] == 7 and runs.loc["mos", "argmax_unresolved"] == 93
    assert pd.isna(runs.loc["softmax", "argmax_argmaxable"])     # not in this softmax's eval.json
    assert list(runs["gradient_share"]) == [0.75, 0.25]


def test_the_guard_finds_the_baseline_of_a_collected_runs_table(tmp_path):
    # the guard matches a run to its unigram on (corpus, vocab_size, test_tokens); the runs
    # table lacked test_tokens, so on a real study every arm was "no baseline for this vocabulary"
    import numpy as np

    from audit.stats import guard

    runs = []
    for head, ppl in (("softmax", 90.0), ("mos", 85.0)):
        run = _run(tmp_path, head, 1, ppl=ppl)
        result = json.loads((run / "eval.json").read_text())
        result.update(test_tokens=82_429, contexts=2_000, vocab_size=2_000)
        (run / "eval.json").write_text(json.dumps(result))
        runs.append(run)
    table = collect(runs)[0]
    assert list(table["test_tokens"]) == [82_429, 82_429]
    baselines = pd.DataFrame([{"corpus": "ptb", "vocab_size": 2000, "n_test": 82_430, "unigram_ppl": 196.5}])
    status = guard.arm_status(table, baselines).set_index("head")
    assert np.allclose(status["unigram_ppl"], 196.5) and status["why"].fillna("").eq("").all(), status


def test_each_run_records_its_body(tmp_path):
    """Issue 37, item 5: a study may give each arm its own body; the table says which one. The
    model the run was built with wins over the settings; a run recorded before bodies existed
    (neither says) was an AWD-LSTM."""
    gru = _run(tmp_path, "gru", 1, settings={"model": {"body": "mybodies.gru:GRUBody"}})
    built = _run(tmp_path, "transformer", 1, settings={"model": {}})
    metrics = json.loads((built / "metrics.json").read_text())
    (built / "metrics.json").write_text(json.dumps({**metrics, "model": {"body": "transformer"}}))
    old = _run(tmp_path, "softmax", 1)
    runs = collect([gru, built, old])[0].set_index("head")
    assert runs["body"].to_dict() == {"gru": "mybodies.gru:GRUBody", "softmax": "awd_lstm",
                                      "transformer": "transformer"}
    # the statistics read the body and the not-measured notes as text, not as metrics
    from audit.stats.io import load_runs

    result = json.loads((gru / "eval.json").read_text())
    note = "not measured: the hidden-gap control of a softmax needs the rank of the body's output, ..."
    (gru / "eval.json").write_text(json.dumps({**result, "hidden_gap_note": note, "f_logits_note": "not measured: x",
                                               "test_tokens": 1998}))
    collect([gru, built, old])[0].to_csv(tmp_path / "runs.csv", index=False)
    loaded = load_runs(tmp_path / "runs.csv").set_index("head")
    assert loaded.loc["gru", "body"] == "mybodies.gru:GRUBody" and loaded.loc["gru", "hidden_gap_note"] == note
    # the scored test tokens reach the table: the guard matches an arm to its unigram baseline by them
    assert loaded.loc["gru", "test_tokens"] == 1998


def test_the_collect_verb_records_the_design_in_every_row(tmp_path):
    from audit.stats.runs_table import main

    dirs = [str(_run(tmp_path, "softmax", 1)), str(_run(tmp_path, "softmax", 2, "failed"))]
    design = "sequential: looks at 4, 7, 10 seeds per arm (initial 4, step 3, max 10)"
    assert main(["--runs", *dirs, "--out", str(tmp_path / "r.csv"), "--pairs-out", str(tmp_path / "p.csv"),
                 "--design", design]) == 0
    assert list(pd.read_csv(tmp_path / "r.csv")["design"]) == [design, design]
    assert "design" not in collect([_run(tmp_path / "x", "softmax", 1)])[0]   # none given: no column
