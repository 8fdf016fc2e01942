"""gpu-check's one-page report (audit.gpucheck.report) from results shaped like a real H200 run.

The results are built here by hand, in the shape the steps write (the first H200 run's
gpu-check.json), with round figures so that every number the page should print can be worked
out by hand: 80,000 tokens/s over PTB's 929,589 training tokens is 11.6 s/epoch, 60,000 of
80,000 is 0.75 x N=1, and so on.
"""

import json
import time

import pytest

from audit.gpucheck import cli, report

PTB_TRAIN_TOKENS = 929_589
FLAGS = {"fp32": {"matmul": "ieee", "cudnn_rnn": "ieee", "cudnn_conv": "ieee", "autocast": "none"},
         "tf32": {"matmul": "tf32", "cudnn_rnn": "tf32", "cudnn_conv": "tf32", "autocast": "none"},
         "bf16": {"matmul": "ieee", "cudnn_rnn": "ieee", "cudnn_conv": "ieee", "autocast": "bfloat16"}}


def check(name, value, limit, ok):
    return {"name": name, "value": value, "limit": limit, "ok": ok}


def step(name, checks=(), figures=None, seconds=1.0, **extra) -> dict:
    r = {"step": name, "simulated": False, "checks": list(checks), "figures": figures or {}, "notes": [],
         "seconds": seconds, **extra}
    r["status"] = cli.status(r)
    return r


def environment(simulated: bool) -> dict:
    gpu = "Simulated CUDA device (CPU)" if simulated else "NVIDIA H200"
    return step("environment", [check("a CUDA device is visible", gpu, "one", True)], {
        "gpu": gpu, "gpu_memory_gib": 139.8, "simulated": simulated, "driver": "580.159.04",
        "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91900, "python": "3.12.3", "numpy": "2.5.2",
        "cpu_count": 16, "precision_flags": FLAGS}, seconds=0.04)


def h200_like(simulated: bool = False) -> list[dict]:
    # the worst rate is not the largest count: 3 in 100 beats 4 in 240, 4 in 20 beats 6 in 40
    syncs = [{"head": "softmax", "body": "awd_lstm", "phase": "sgd", "steps": 240, "syncs": 4,
              "valid_chunks": 40, "valid_syncs": 6},
             {"head": "mos", "body": "transformer", "phase": "adamw", "steps": 100, "syncs": 3,
              "valid_chunks": 20, "valid_syncs": 4}]
    memory = [{"config": "paper-ptb", "arm": "mos", "job": "train", "precision": "fp32", "planned_gb": 2.2, "allocated_gb": 3.3,
               "reserved_gb": 4.07, "ratio": 1.5},
              {"config": "transformer-paper", "arm": "mos", "job": "evaluate", "precision": "bf16", "planned_gb": 4.79,
               "allocated_gb": 5.02, "reserved_gb": 6.69, "ratio": 5.02 / 4.79}]
    speed = {"timed_steps": 60, "warmup_steps": 15,
             "one_run": {"softmax": {"tokens_per_second": 80_000.0, "seconds_per_epoch": PTB_TRAIN_TOKENS / 80_000,
                                     "peak_gb": 1.218445312},
                         "mos": {"tokens_per_second": 40_000.0, "seconds_per_epoch": PTB_TRAIN_TOKENS / 40_000,
                                 "peak_gb": 4.169138176}},
             "precision_softmax": {"fp32": {"tokens_per_second": 75_000.0, "ms_per_step": 18.67},
                                   "tf32": {"tokens_per_second": 82_000.0, "ms_per_step": 17.07}},
             "precision_head": {"mos": {"tokens_per_second": 52_000.0, "x_config": 1.3}},
             "seeds_per_process": {"softmax": [{"k": 2, "tokens_per_second": 150_000.0, "x_one": 1.875}]},
             "gpu_hours_seeds_per_process": {"paper-ptb": 149.5},
             "concurrency_softmax": [{"n": 1, "tokens_per_second": 80_000.0, "peak_gb": 1.22},
                                     {"n": 2, "tokens_per_second": 60_000.0, "peak_gb": 1.22},
                                     {"n": 4, "tokens_per_second": 100_000.0, "peak_gb": 1.22}],
             "concurrency_softmax_mps": [{"n": 2, "tokens_per_second": 120_000.0, "peak_gb": 1.3, "mps": True}],
             "deterministic": {"softmax": {"tokens_per_second": 60_000.0, "x_default": 0.75, "runs": 2,
                                           "bitwise_equal": True},
                               "plif": {"error": "RuntimeError: index_add_cuda_ does not have a deterministic "
                                                 "implementation"}},
             "best_n": 2, "best": "N=2 under MPS", "gpu_hours": {"paper-ptb": 595.04, "mos-sweep-paper-ptb": 1278.4},
             "fp32_tflops": 51.2,
             "graphs": {"softmax": {"eager_tokens_per_second": 80_000.0, "eager_share": 0.171, "tokens_per_second": 240_000.0,
                                    "x_eager": 3.0, "share": 0.513, "graph_steps": 57, "peak_gb": 1.3},
                        "mos": {"eager_tokens_per_second": 40_000.0, "eager_share": 0.3}},
             "gpu_hours_graphs": {"paper-ptb": 140.2, "mos-sweep-paper-ptb": 300.0}}
    return [
        environment(simulated),
        step("correctness", [check("log-probs awd_lstm/softmax", "max |diff| 9.54e-07",
                                   "<= 5e-05 + 1e-05 |log p|", True)],
             {"weight_drop_ms": {"flat": 2.5, "dropped": 3.125, "n_in": 400, "n_out": 1150, "batch": 20, "steps": 70},
              "weight_drop_cudnn_warned": True,
              "graphs_paper_busy": {"eager": {"steps": 20, "wall_ms_per_step": 18.6, "busy_ms_per_step": 3.162,
                                              "share": 0.17},
                                    "graphs": {"steps": 20, "wall_ms_per_step": 6.2, "busy_ms_per_step": 3.1,
                                               "share": 0.5}}}, seconds=9.39),
        step("syncs", [check("syncs per step, awd_lstm/softmax sgd", "0.017 (2 in 120)", "<= 0.02", True)],
             {"syncs": syncs}, seconds=35.1),
        step("memory", [check("memory plan, paper-ptb train (mos, fp32)", "1.50 (3.30 of 2.20 GB planned)",
                              "measured / planned in [0.8, 1.25]", False),
                        check("memory plan, transformer-paper evaluate (mos, fp32)", "1.05 (5.02 of 4.79 GB planned)",
                              "measured / planned in [0.8, 1.25]", True)], {"memory": memory}, seconds=61.12),
        step("speed", [check("aggregate speed-up at the best N (softmax)", "1.25x at N=4", ">= 5x (target, docs/gpus.md)",
                             False)], speed, seconds=144.7),
        step("dag", [check("Snakemake cpu exits 0", 0, "0", True)],
             {"cpu_wall_seconds": 119.6, "gpu4_wall_seconds": 93.2}, seconds=151.3, incomplete=True,
             notes=["gpu1: out of time"]),
    ]


def page(results, code=0) -> str:
    return report.markdown(results, 8, time.time() - 431, code)


def test_the_statuses_of_the_h200_like_results():
    assert [r["status"] for r in h200_like()] == ["pass", "pass", "pass", "off-target", "off-target", "incomplete"]
    assert cli.exit_code(h200_like()) == 0


def test_the_simulated_banner_appears_exactly_when_the_device_is_simulated():
    real, simulated = page(h200_like(False)), page(h200_like(True))
    assert "Simulated device" not in real and "not GPU figures" not in real
    assert real.startswith("# gpu-check: NVIDIA H200 (")
    assert simulated.count("**Simulated device (CPU tensors that report cuda:0") == 1
    assert "no timing or memory figure below is a GPU figure" in simulated
    # the speed tables say so under their own heading too
    assert "## Speed (paper-ptb arms, tiny model: not GPU figures)" in simulated
    assert "## Speed (paper-ptb arms)\n" in real


def test_without_an_environment_result_the_page_does_not_claim_a_gpu():
    # environment never ran (skipped): nothing says the device was real, so the banner stays
    results = h200_like()[1:]
    text = page([step("environment", skipped="needs at least 5 s, 0 s left of --minutes 0.05")] + results, 1)
    assert text.startswith("# gpu-check: no device (")
    assert "**Simulated device" in text


def test_pass_and_fail_lines_and_the_steps_table():
    text = page(h200_like())
    assert "Result: **PASS** (exit 0), planned into 8 minutes" in text
    assert "Result: **FAIL** (exit 1)" in page(h200_like(), 1)
    assert "| memory | off-target | 61 | 1 of 2 |" in text
    assert "| dag | incomplete | 151 | 1 of 1 | gpu1: out of time |" in text
    assert "- GPU: NVIDIA H200, 139.8 GiB; driver 580.159.04" in text
    assert ("fp32: ieee / ieee / ieee / none; tf32: tf32 / tf32 / tf32 / none; "
            "bf16: ieee / ieee / ieee / bfloat16") in text


def test_failed_checks_are_listed_and_passed_ones_are_not():
    text = page(h200_like())
    section = text.split("## Checks not met")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| step |")]
    assert rows == ["| memory | memory plan, paper-ptb train (mos, fp32) | 1.50 (3.30 of 2.20 GB planned) | "
                    "measured / planned in [0.8, 1.25] |",
                    "| speed | aggregate speed-up at the best N (softmax) | 1.25x at N=4 | >= 5x (target, docs/gpus.md) |"]
    everything_passes = [r for r in h200_like() if r["step"] not in ("memory", "speed")]
    assert "## Checks not met" not in page(everything_passes)


def test_a_failed_correctness_check_is_listed_with_its_value_and_limit():
    results = h200_like()
    results[1] = step("correctness", [check("log-probs awd_lstm/gss", "max |diff| 0.001", "<= 5e-05 + 1e-05 |log p|",
                                            False)])
    assert results[1]["status"] == "fail"
    assert "| correctness | log-probs awd_lstm/gss | max |diff| 0.001 | <= 5e-05 + 1e-05 |log p| |" in page(results, 1)


def test_host_syncs_line_names_the_worst_phase_per_step_and_per_chunk():
    text = page(h200_like())
    # 3 / 100 = 0.030 beats 4 / 240 = 0.017; 4 / 20 = 0.20 beats 6 / 40 = 0.15
    assert ("2 phases counted; most per training step: 0.030 (transformer/mos adamw, 3 in 100); most per "
            "validation chunk: 0.20. Budget: 1 per 50 steps, 1 per chunk.") in text


def test_memory_table_rows():
    text = page(h200_like())
    assert "| paper-ptb | mos | train | fp32 | 2.2 | 3.3 | 4.07 | 1.50 |" in text
    assert "| transformer-paper | mos | evaluate | bf16 | 4.79 | 5.02 | 6.69 | 1.05 |" in text


def test_speed_tables_rows():
    text = page(h200_like())
    assert "| softmax | 80,000 | 11.6 | 1.22 |" in text      # 929,589 / 80,000 = 11.62 s
    assert "| mos | 40,000 | 23.2 | 4.17 |" in text
    assert "| fp32 | 75,000 | 18.7 |" in text and "| tf32 | 82,000 | 17.1 |" in text
    assert "| 1 | no | 80,000 | 1.00 | 1.22 |" in text
    assert "| 2 | no | 60,000 | 0.75 | 1.22 |" in text
    assert "| 4 | no | 100,000 | 1.25 | 1.22 |" in text
    assert "| 2 | yes | 120,000 | 1.50 | 1.30 |" in text      # under MPS, against the plain N = 1
    assert "Best: N=2 under MPS" in text
    # train.deterministic: 60,000 of the one run's 80,000; an arm torch refused is shown with its message
    assert "| softmax | 60,000 | 0.75 | yes |" in text
    assert "| plif | error: RuntimeError: index_add_cuda_ does not have a deterministic implementation |  |  |" in text
    assert "| paper-ptb | 595.0 | 140.2 |" in text and "| mos-sweep-paper-ptb | 1,278.4 | 300.0 |" in text
    assert "shares of this GPU's measured fp32 matmul rate, 51.2 TFLOP/s (TF32 off)" in text
    assert "| softmax | 80,000 | 17.1% | 240,000 | 3.00 | 51.3% | 57 |" in text
    assert "| mos | 40,000 | 30.0% | not measured |  |  |  |" in text
    assert "| train.precision: bf16_head (issue 57) | tokens/s | x the config's precision |" in text
    assert "| mos | 52,000 | 1.30 |" in text
    assert "| softmax | 2 | 150,000 | 1.88 |" in text
    assert "Projected GPU-hours at each family's best k seeds per process, no MPS: paper-ptb 149.5" in text


def test_weight_drop_line_gives_both_paths_and_the_cudnn_warning():
    text = page(h200_like())
    assert ("One forward and backward of a 400 -> 1150 LSTM layer (batch 20, 70 steps; paper-ptb's first layer), "
            "median of 20: flat weights 2.50 ms, weight-dropped 3.12 ms (cuDNN warned of non-contiguous weights: "
            "yes).") in text
    assert "## Weight drop" not in page([h200_like()[0]])


def test_the_paper_size_busy_share_per_path_and_not_measured_where_it_was_not():
    text = page(h200_like())
    assert "## GPU-busy share per step (paper-ptb softmax, torch.profiler)" in text
    assert "| eager | 18.60 | 3.16 | 17.0% |" in text and "| graphs | 6.20 | 3.10 | 50.0% |" in text
    results = h200_like()
    results[1]["figures"]["graphs_paper_busy"] = {"eager": None, "graphs": None}   # off-GPU: never a number
    assert "| eager | not measured |  |  |" in page(results) and "%" not in page(results).split("torch.profiler")[1][:400]
    assert "## GPU-busy share" not in page([h200_like()[0]])


def test_dag_wall_seconds_and_absent_sections():
    text = page(h200_like())
    assert "Wall seconds: cpu 120, gpu4 93 (" in text
    bare = page(h200_like()[:2])
    for heading in ("## Host syncs", "## Memory", "## Speed", "## Smoke study", "## Errors"):
        assert heading not in bare


def test_errors_are_listed_with_their_step():
    results = h200_like()
    results[4] = step("speed", [], {}, error="exit 1: RuntimeError: CUDA error: an illegal memory access")
    results[3]["errors"] = ["paper-wt2: OutOfMemoryError: CUDA out of memory"]
    results[3]["status"] = cli.status(results[3])
    text = page(results, 1)
    errors = text.split("## Errors (the step logs are under steps/)")[1]
    assert "- speed: exit 1: RuntimeError: CUDA error: an illegal memory access" in errors
    assert "- memory: paper-wt2: OutOfMemoryError: CUDA out of memory" in errors
    assert "| speed | error |" in text and "| memory | error |" in text


@pytest.mark.parametrize("simulated", [False, True])
def test_write_puts_everything_in_the_json_and_the_page_beside_it(tmp_path, simulated):
    results = h200_like(simulated)
    json_path, md_path = report.write(tmp_path, results, 8, time.time(), 0)
    blob = json.loads(json_path.read_text())
    assert blob["simulated"] is simulated and blob["exit"] == 0 and blob["minutes"] == 8
    assert blob["gpu"] == results[0]["figures"]["gpu"]
    assert blob["steps"] == json.loads(json.dumps(results))
    assert ("**Simulated device" in md_path.read_text()) is simulated
