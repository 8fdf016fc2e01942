"""A fabricated-but-realistic small study folder, for the report's tests and for previewing.

``fabricate_study`` writes what the pipeline would have written up to the runs table (run folders
with ``metrics.json``, ``eval.json``, ``spectrum.npz``; ``runs.csv``; the resolved and the
statistics config; a data file), drawn from a seeded Generator; ``build_report`` then runs the
real ``python -m audit stats`` and ``python -m audit report`` commands on it, in order (in
process, through ``audit.__main__.main``). Nothing
here is a result: it exists so the report can be checked in seconds without training.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

BENCHMARKS = {"EN-MC-30": 30, "EN-RG-65": 65, "EN-WS-353-ALL": 353}
# per head: test perplexity mean, SD over seeds, Press rank mean, singular-value decay rate
HEADS = {"softmax": (120.0, 0.8, 402, 0.035), "sigsoftmax": (118.5, 0.9, 2900, 0.012),
         "mos": (117.0, 1.1, 4100, 0.008)}


def fabricate_study(folder: Path, rng: np.random.Generator, heads: dict | None = None,
                    seeds: tuple[int, ...] = (1, 2, 3, 4, 5), failed: tuple[str, int] | None = ("mos", 5),
                    study: str = "demo", description: str = "Fabricated study for the report tests.",
                    contexts: int = 600) -> dict:
    """Write a small study into ``folder`` and return its paths.

    Args:
        folder: empty folder to write into.
        rng: seeded Generator for every fabricated number.
        heads: name -> (test ppl mean, SD, Press rank, decay rate); default ``HEADS``.
        seeds: seeds per head.
        failed: (head, seed) of one run recorded as diverged, or None.
        study, description: config values (put markup here to test escaping).
        contexts: rows of the fabricated log-P matrices (length of each spectrum).

    Returns:
        {runs, run_dirs, resolved, stats_config, reports, tables, figures, data_dir, data_files}.
    """
    heads = heads or HEADS
    folder = Path(folder)
    reports, results = folder / "reports" / study, folder / "results" / study
    rows, run_dirs = [], []
    for head, (mean, sd, rank, decay) in heads.items():
        for seed in seeds:
            run_dir = results / "runs" / "ptb" / head / str(seed)
            run_dir.mkdir(parents=True, exist_ok=True)
            run_dirs.append(run_dir)
            ok = (head, seed) != failed
            ppl = mean + sd * rng.standard_normal()
            epochs = int(rng.integers(8, 11))
            metrics = {"corpus": "ptb", "head": head, "seed": seed, "status": "ok" if ok else "failed",
                       "error": "" if ok else "FloatingPointError: non-finite loss (nan) at epoch 3",
                       "device": "cpu", "epochs_run": epochs if ok else 3,
                       "best_epoch": (epochs if seed == seeds[0] else epochs - 2) if ok else None,
                       "wall_seconds": float(60 * epochs * (1 + 0.1 * rng.random())), "n_params": 24_000_000}
            (run_dir / "metrics.json").write_text(json.dumps(metrics))
            sv = np.sort(np.exp(-decay * np.arange(contexts)) * (1 + 0.05 * rng.random(contexts)))[::-1]
            sv[min(rank, contexts):] = 0.0
            np.savez(run_dir / "spectrum.npz", **({"log_p_sv": 1e4 * sv} if ok else {}))
            rho = {b: float(np.clip(0.3 + 0.05 * len(head) / 7 + 0.08 * rng.standard_normal(), -1, 1))
                   for b in BENCHMARKS}
            result = {"status": metrics["status"]}
            if ok:
                result.update(test_ppl=ppl, press_rank=int(rank + rng.integers(-3, 4)), wordsim=rho,
                              wordsim_pairs=dict(BENCHMARKS),
                              wordsim_found={b: int(0.8 * n) for b, n in BENCHMARKS.items()})
            (run_dir / "eval.json").write_text(json.dumps(result))
            row = {"study": study, "corpus": "ptb", "head": head, "seed": seed, "status": metrics["status"],
                   "error": metrics["error"], "n_params": metrics["n_params"],
                   "wall_seconds": metrics["wall_seconds"], "epochs_run": metrics["epochs_run"],
                   "best_epoch": metrics["best_epoch"]}
            if ok:
                row.update(train_ppl=ppl * 0.7, valid_ppl=ppl * 1.04, test_ppl=ppl,
                           press_rank=result["press_rank"], **{"erank_1e-3": rank // 10},
                           **{f"wordsim_{b}": r for b, r in rho.items()})
            rows.append(row)
    reports.mkdir(parents=True, exist_ok=True)
    runs = pd.DataFrame(rows)
    runs.to_csv(reports / "runs.csv", index=False)
    names = list(heads)
    config = {"study": study, "description": description, "seeds": list(seeds),
              "heads": [{"name": h} for h in names],
              "comparisons": [{"family": "heads-vs-softmax", "baseline": names[0], "against": names[1:],
                               "metrics": ["test_ppl", "press_rank"], "equivalence_margin": 0.5}],
              "correlations": [{"name": "press-rank-vs-test-ppl", "x": "press_rank", "y": "test_ppl"}],
              "claims": [{"id": "sigsoftmax-lowers-ppl", "source": "Kanai et al. 2018",
                          "statement": "SigSoftmax lowers test perplexity compared with softmax",
                          "comparison": {"head_a": "sigsoftmax", "head_b": "softmax", "metric": "test_ppl"},
                          "expect": "lower"},
                         {"id": "rank-correlates", "source": "Parthiban et al. 2021",
                          "statement": "The Press rank of log-P correlates with test perplexity across runs",
                          "correlation": {"name": "press-rank-vs-test-ppl", "level": "runs", "method": "pearson"},
                          "expect": "nonzero"},
                         {"id": "plif-lowers-ppl", "source": "Ganea et al. 2019",
                          "statement": "LMS-PLIF lowers test perplexity compared with softmax",
                          "comparison": {"head_a": "plif", "head_b": "softmax", "metric": "test_ppl"},
                          "expect": "lower"}],
              "stats": {"min_seeds": 5, "bootstrap_resamples": 300, "bootstrap_seed": 7}}
    results.mkdir(parents=True, exist_ok=True)
    stats_config = results / "stats_config.yaml"
    stats_config.write_text(yaml.safe_dump({k: config[k] for k in ("study", "comparisons", "correlations",
                                                                   "claims", "stats")}, sort_keys=False))
    resolved = results / "config.resolved.yaml"
    resolved.write_text(yaml.safe_dump(config, sort_keys=False))
    data_dir = folder / "results" / "data"
    (data_dir / "wordsim").mkdir(parents=True, exist_ok=True)
    data_file = data_dir / "wordsim" / "EN-MC-30.txt"
    data_file.write_text("car automobile 3.92\n")
    return {"runs": reports / "runs.csv", "run_dirs": run_dirs, "resolved": resolved,
            "stats_config": stats_config, "reports": reports, "tables": reports / "tables",
            "figures": reports / "figures", "data_dir": data_dir, "data_files": [data_file]}


def _audit(*args) -> None:
    """``python -m audit ARGS`` in this process (same code path, without the import cost)."""
    from audit.__main__ import main

    code = main([str(a) for a in args])
    if code != 0:
        raise RuntimeError(f"python -m audit {' '.join(map(str, args))} exited with {code}")


def build_report(study: dict, repo: Path) -> Path:
    """Run the real statistics and report commands on a fabricated study (``repo``: the folder whose
    git state the provenance records); returns the path of audit.html."""
    runs, tables, figures = study["runs"], study["tables"], study["figures"]
    dirs = [str(d) for d in study["run_dirs"]]
    _audit("stats", "--runs", runs, "--config", study["stats_config"], "--out", tables)
    for name in ("results", "ranks", "wordsim_rho"):   # --config: stats.alpha sets the intervals' level
        _audit("report", "table", "--name", name, "--runs", runs, "--config", study["stats_config"],
               "--out", tables / f"{name}.csv")
    _audit("report", "table", "--name", "wordsim_coverage", "--run-dirs", *dirs,
           "--out", tables / "wordsim_coverage.csv")
    _audit("report", "table", "--name", "warnings", "--runs", runs, "--config", study["stats_config"],
           "--comparisons", tables / "comparisons.csv", "--correlations", tables / "correlations.csv",
           "--out", tables / "warnings.csv")
    _audit("report", "figure", "--name", "rank_decay", "--run-dirs", *dirs, "--out", figures / "rank_decay.svg")
    _audit("report", "figure", "--name", "rank_vs_ppl", "--runs", runs, "--correlations",
           tables / "correlations.csv", "--out", figures / "rank_vs_ppl.svg")
    _audit("report", "figure", "--name", "strip", "--runs", runs, "--config", study["stats_config"],
           "--out", figures / "strip.svg")
    _audit("report", "figure", "--name", "wordsim_wins", "--wins", tables / "wordsim_wins.csv",
           "--out", figures / "wordsim_wins.svg")
    provenance = study["reports"] / "provenance.json"
    _audit("report", "provenance", "--config", study["resolved"], "--run-dirs", *dirs, "--data-dir",
           study["data_dir"], "--data-files", *map(str, study["data_files"]), "--command",
           "snakemake --cores all --configfile configs/demo.yaml", "--repo", repo, "--out", provenance)
    out = study["reports"] / "audit.html"
    _audit("report", "html", "--runs", runs, "--config", study["resolved"], "--tables",
           *sorted(map(str, tables.glob("*.csv"))), "--figures", *sorted(map(str, figures.glob("*.svg"))),
           "--provenance", provenance, "--out", out)
    return out
