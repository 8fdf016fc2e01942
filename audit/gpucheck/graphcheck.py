"""Do CUDA graphs (``train.cuda_graphs``) give the eager step's numbers on this GPU? (issue 47)

One small AWD-LSTM run per head family (``audit.bench.gpu.families``) is trained ``STEPS`` steps
three times on CUDA from one seed, with the AWD-LSTM's default dropouts (a replayed graph must
draw the eager step's masks from the device's generator): eager, eager again, and through
graphs (a length's first step eager, then replays). The eager rerun measures this GPU's own
run-to-run spread (cuBLAS and cuDNN may sum in another order between calls); the graph run must
agree with the first eager run step by step, within float32's tolerance or 10 times that
spread, whichever is larger. Part of gpu-check's correctness step; on the simulated device the
graphs cannot run (tests/train/test_graphs.py checks their bookkeeping with a stand-in there).
"""

from __future__ import annotations

from audit.gpucheck.common import max_param_gap

STEPS = 50
LOSS_RTOL = 1e-5    # max over steps of |loss_graph - loss_eager| / |loss_eager|: one forward's rounding
PARAM_TOL = 1e-4    # max |w_graph - w_eager| / max(1, max |w_eager|) after STEPS SGD steps (correctness.PARAM_TOL)
DEFAULT_DROPOUT = {"dropoute": 0.1, "dropouti": 0.4, "dropouth": 0.3, "dropout": 0.4, "wdrop": 0.5}


def train_steps(settings: dict, corpus: str, steps: int) -> dict:
    """Train ``steps`` steps (about: the lengths are drawn) of one run; its per-step training
    losses (read once, at the end), final weights on the host and the steps a graph replayed."""
    import torch

    from audit.train.trainer import Trainer, mean_sequence_length

    trainer = Trainer(settings, corpus, log=lambda msg: None)
    losses = record_losses(trainer)
    t = trainer.t
    t["epoch_tokens"] = int(steps * mean_sequence_length(t["bptt"], t["variable_bptt"]) * t["batch_size"])
    row = trainer.train_epoch()
    weights = {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()}
    return {"losses": torch.stack(losses).double().cpu(), "weights": weights, "graph_steps": row.get("graph_steps", 0)}


def record_losses(trainer) -> list:
    """The list each training step's loss (a device scalar) is appended to from now on."""
    losses = []
    if trainer.graphs is not None:
        step = trainer.graphs.step
        # a graph overwrites its outputs at the next replay of that length: keep a copy
        trainer.graphs.step = lambda *a: (lambda out: losses.append(out[0].clone()) or out)(step(*a))
    else:
        forward = trainer.forward_loss
        trainer.forward_loss = lambda *a: (lambda out: losses.append(out[0].detach()) or out)(forward(*a))
    return losses


def gaps(a: dict, b: dict) -> tuple[float, float]:
    """(max relative loss gap over the common steps, max weight gap over max(1, max |w|))."""
    n = min(len(a["losses"]), len(b["losses"]))
    la, lb = a["losses"][:n], b["losses"][:n]
    return ((la - lb).abs() / lb.abs()).max().item(), max_param_gap(a["weights"], b["weights"])


def run(result, corpus: str, simulated: bool) -> None:
    """The check per family; on the simulated device a note instead (no CUDA graphs on a CPU)."""
    from audit.bench.gpu import families
    from audit.bench.picks import default_body
    from audit.gpucheck.common import tiny_settings

    if simulated:
        result.note("CUDA graphs: not checkable on the simulated device (tests/train/test_graphs.py checks "
                    "their bookkeeping there with a stand-in)")
        return
    from audit.errors import AuditError

    for head in families():
        runs = {}
        try:
            for label, graphs in (("eager", False), ("rerun", False), ("graphs", True)):
                settings = tiny_settings(head, default_body(), "cuda", cuda_graphs=graphs)
                settings["model"].update(DEFAULT_DROPOUT)
                runs[label] = train_steps(settings, corpus, STEPS)
        except AuditError as err:   # a captured tensor that moved (audit.train.graphs): a failed check, its line
            result.check(f"CUDA graphs = eager, {head}, {STEPS} steps", str(err), "runs to the end", False)
            continue
        spread = gaps(runs["rerun"], runs["eager"])
        loss, weights = gaps(runs["graphs"], runs["eager"])
        loss_tol, param_tol = max(LOSS_RTOL, 10 * spread[0]), max(PARAM_TOL, 10 * spread[1])
        replayed = runs["graphs"]["graph_steps"]
        result.check(f"CUDA graphs = eager, {head}, {len(runs['eager']['losses'])} steps",
                     f"loss {loss:.3g}, weights {weights:.3g} ({replayed} steps replayed)",
                     f"loss <= {loss_tol:.3g}, weights <= {param_tol:.3g} (fp32 or 10x the eager rerun's "
                     f"{spread[0]:.3g}, {spread[1]:.3g})",
                     loss <= loss_tol and weights <= param_tol and replayed > 0)
