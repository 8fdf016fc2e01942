"""Is the CUDA path right on this GPU? Every built-in head on both bodies against the CPU.

For each (body, head): the log-probs of the initial model, one optimiser step (SGD for the
AWD-LSTM, AdamW for the Transformer) and, for the AWD-LSTM, one averaging step (ASGD's running
mean), run through the real ``Trainer`` on CUDA and on the CPU from the same seed, with dropout
off (the two devices draw different masks from one seed). Then PLIF's scatter-add (atomic adds
in no fixed order on a GPU), the weight-dropped LSTM layer (cuDNN's flat-weight copy) with one
mask for both devices, the Press rank of a spectrum accumulated on the GPU, the
forward-mode Jacobian (``torch.func``) on CUDA against reverse mode, and the training step replayed
from CUDA graphs (``train.cuda_graphs``) against the eager one (``audit.gpucheck.graphcheck``), and
the same at paper size across a validation pass and the switch to averaging, with the share of
GPU-busy time per step (``audit.gpucheck.graphpaper``).

Tolerances are float32's with TF32 off (``train.precision: fp32`` sets it): cuBLAS/cuDNN and the
CPU BLAS sum in different orders, so values agree to a few ulps of the quantities summed, not
bitwise. Each is stated here and in the report.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

# |log p_cuda - log p_cpu| <= LOGP_ATOL + LOGP_RTOL |log p_cpu|: a V = 500 log-sum-exp over float32
# logits carries ~1e-6 rounding; a 50x margin for the heads' extra terms (tests/cuda/test_cuda.py)
LOGP_ATOL, LOGP_RTOL = 5e-5, 1e-5
LOSS_RTOL = 1e-5     # the step's training loss: the same forward pass, summed in another order
# max |w_cuda - w_cpu| after the step, over max(1, max |w_cpu|): an SGD step moves weights by at
# most lr x clip = 20 x 0.25 = 5 in norm, and its rounding (~1e-6 relative) by far less
PARAM_TOL = 1e-4
STEPPED_LOSS_RTOL = 1e-4   # the loss of the AdamW-stepped model on the step's batch
PLIF_SPREAD = 1e-4   # max |g1 - g2| / max |g| of PLIF's slope gradient, run to run
# ||x_cuda - x_cpu|| / ||x_cpu|| of the weight-dropped LSTM layer's output and of each gradient:
# 20 recurrent steps of float32 in cuDNN's order against the CPU's (~1e-6), with a 10x margin
WDROP_TOL = 1e-5
# paper-ptb's first LSTM layer (emb 400 -> hidden 1150, batch 20, bptt 70), where weight drop is timed
WDROP_SHAPE = {"n_in": 400, "n_out": 1150, "batch": 20, "steps": 70}
JACOBIAN_TOL = 1e-5  # ||J_forward - J_reverse|| / ||J_reverse||, both on CUDA


def compare_run(head: str, body: str, corpus: str, result) -> None:
    """Log-probs, one optimiser step and one averaging step of one (body, head) on CUDA vs CPU."""
    import torch

    from audit.gpucheck.common import max_param_gap, tiny_settings
    from audit.train.trainer import Trainer

    trainers = {}
    for device in ("cpu", "cuda"):
        settings = tiny_settings(head, body, device, variable_bptt=False)
        settings["train"]["epoch_tokens"] = settings["train"]["bptt"] * settings["train"]["batch_size"]  # one step
        trainers[device] = Trainer(settings, corpus, log=lambda msg: None)
    cpu, gpu = trainers["cpu"], trainers["cuda"]
    key = f"{body}/{head}"
    words = cpu.train_data[:16]
    with torch.no_grad():
        cpu.model.eval(), gpu.model.eval()
        want = cpu.model(words, cpu.model.init_hidden(words.size(1)))[0]
        got = gpu.model(words.to(gpu.device), gpu.model.init_hidden(words.size(1)))[0].cpu()
    bound = LOGP_ATOL + LOGP_RTOL * want.abs()
    excess = ((got - want).abs() - bound).max().item()
    result.check(f"log-probs {key}", f"max |diff| {(got - want).abs().max().item():.3g}",
                 f"<= {LOGP_ATOL:g} + {LOGP_RTOL:g} |log p|", bool(torch.isfinite(got).all()) and excess <= 0)
    from audit.bench import picks

    # the default body (AWD-LSTM) trains with SGD and ASGD, the other (the Transformer) with AdamW
    adamw = body != picks.default_body()
    optimizer = "AdamW" if adamw else "SGD"
    rows = {d: t.train_epoch() for d, t in trainers.items()}
    loss_gap = abs(rows["cuda"]["train_loss"] - rows["cpu"]["train_loss"]) / abs(rows["cpu"]["train_loss"])
    result.check(f"{optimizer} step loss {key}", f"{loss_gap:.3g}", f"relative <= {LOSS_RTOL:g}", loss_gap <= LOSS_RTOL)
    gap = max_param_gap(gpu.model.state_dict(), cpu.model.state_dict())
    if adamw:
        # AdamW's first step moves each weight by about lr x sign(g): a gradient entry that is
        # rounding noise on both devices may take either sign, so its weights can differ by up to
        # 2 lr; what must agree is the function, i.e. the loss the stepped model gives
        lr = cpu.t["lr"]
        result.check(f"AdamW step weights {key}", f"{gap:.3g}", f"max |diff| / max(1, max |w|) <= 2 lr = {2 * lr:g}",
                     gap <= 2 * lr)
        with torch.no_grad():
            after = [t.model(words.to(t.device), t.model.init_hidden(words.size(1)))[0].float().cpu() for t in (cpu, gpu)]
        targets = cpu.train_data[1:17].reshape(-1)
        losses = [torch.nn.functional.nll_loss(a.reshape(-1, a.size(-1)), targets).item() for a in after]
        moved = abs(losses[1] - losses[0]) / abs(losses[0])
        result.check(f"AdamW stepped model's loss {key}", f"{moved:.3g}", f"relative <= {STEPPED_LOSS_RTOL:g}",
                     moved <= STEPPED_LOSS_RTOL)
        return  # no averaging (audit/config/arms.py refuses ASGD with AdamW)
    result.check(f"{optimizer} step weights {key}", f"{gap:.3g}", f"max |diff| / max(1, max |w|) <= {PARAM_TOL:g}",
                 gap <= PARAM_TOL)
    for t in trainers.values():
        t.start_averaging()
        t.train_epoch()
    gap = max_param_gap(gpu.average.module.state_dict(), cpu.average.module.state_dict())
    result.check(f"averaging step {key}", f"{gap:.3g}", f"max |diff| / max(1, max |w|) <= {PARAM_TOL:g}",
                 gap <= PARAM_TOL)


def _head(name: str, d: int, vocab: int, seed: int = 0):
    import torch
    import torch.nn as nn

    from audit.gpucheck.common import tiny_options
    from audit.model.heads import HeadSpec, build_head

    torch.manual_seed(seed)
    return build_head(name, HeadSpec(d_in=d, embedding=nn.Embedding(vocab, d), options=tiny_options(name)))


def plif_spread(result) -> None:
    """PLIF's slope gradient is a bincount with weights: atomic adds on CUDA, any order."""
    import torch
    import torch.nn.functional as F

    from audit.bench import picks

    head = _head(picks.trained_knots(), 32, 2000).train().cuda()
    h = torch.randn(20, 10, 32, generator=torch.Generator().manual_seed(3)).cuda()
    targets = torch.randint(0, 2000, (200,), generator=torch.Generator().manual_seed(4)).cuda()
    grads = []
    for _ in range(5):
        head.zero_grad(set_to_none=True)
        F.nll_loss(head(h).reshape(-1, 2000), targets).backward()
        grads.append(head.w.grad.flatten().double().cpu())
    scale = grads[0].abs().max().item()
    spread = max((g - grads[0]).abs().max().item() for g in grads[1:]) / scale
    result.check("PLIF scatter-add spread over 5 runs", f"{spread:.3g}", f"<= {PLIF_SPREAD:g} of max |g|",
                 scale > 0 and spread <= PLIF_SPREAD)


def press_rank(result) -> None:
    """The Gram accumulated on the GPU gives the CPU's Press rank (softmax: <= d + 2)."""
    import torch

    from audit.bench import picks
    from audit.evaluate import spectrum

    base, lifted = picks.baseline(), picks.rank_lifting()
    for name in (base, lifted):
        head = _head(name, 16, 300).eval()
        h = torch.randn(1200, 16, generator=torch.Generator().manual_seed(5))
        with torch.no_grad():
            log_p = head(h.unsqueeze(0)).squeeze(0)
        chunks = list(log_p.split(200))
        cpu = spectrum.singular_values([c.numpy() for c in chunks])
        gpu = spectrum.singular_values([c.cuda() for c in chunks])
        m, n = log_p.shape
        ranks = spectrum.press_rank(gpu, m, n), spectrum.press_rank(cpu, m, n)
        bound_holds = (ranks[1] <= 16 + 2) == (name == base)
        result.check(f"Press rank of a CUDA spectrum ({name})", f"CUDA {ranks[0]}, CPU {ranks[1]}",
                     f"equal; {base} <= d + 2 = 18, {lifted} above", ranks[0] == ranks[1] and bound_holds)


def _weight_drop_layer(n_in: int, n_out: int, device: str, mask):
    """A training-mode WeightDropLSTM (wdrop 0.5) on ``device`` whose dropped matrix is
    ``weight_hh * mask``: one mask drawn on the CPU for both devices, so only the kernels differ."""
    import torch

    from audit.model.bodies.awd_lstm import WeightDropLSTM

    torch.manual_seed(7)
    layer = WeightDropLSTM(n_in, n_out, 0.5).to(device).train()
    if mask is not None:
        layer.drop_hh = lambda weight: weight * mask.to(weight.device)
    return layer


def _drop_pass(layer, x, probe):
    """Output and the gradient of every weight (the undropped weight_hh's included) of one pass."""
    layer.zero_grad(set_to_none=True)
    zeros = x.new_zeros(1, x.size(1), layer.lstm.hidden_size)
    out, _ = layer(x, (zeros, zeros))
    (out * probe).sum().backward()
    return [out.detach()] + [p.grad.detach() for p in layer.parameters()]


def weight_drop(result, simulated: bool) -> None:
    """AWD-LSTM's DropConnect in training: the dropped weight_hh lies outside cuDNN's flat weight
    buffer, so the weights are packed anew every call. With one mask for both
    devices the output and every gradient must match the CPU's; the mask must change the output
    (else the dropped path was not taken). Then what it costs at paper-ptb's size: one
    forward and backward of the layer, dropped against the flat path (CUDA events, median of 20)."""
    import warnings

    import torch

    n_in, n_out, rng = 24, 40, torch.Generator().manual_seed(8)
    mask = (torch.rand(4 * n_out, n_out, generator=rng) > 0.5).float() / 0.5
    x, probe = torch.randn(20, 4, n_in, generator=rng), torch.randn(20, 4, n_out, generator=rng)
    want = _drop_pass(_weight_drop_layer(n_in, n_out, "cpu", mask), x, probe)
    flat = _drop_pass(_weight_drop_layer(n_in, n_out, "cpu", None).eval(), x, probe)[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [t.cpu() for t in _drop_pass(_weight_drop_layer(n_in, n_out, "cuda", mask), x.cuda(), probe.cuda())]
    gap = max(((g.double() - w.double()).norm() / w.double().norm()).item() for g, w in zip(got, want))
    moved = (want[0] - flat).abs().max().item()
    result.check("weight drop (AWD-LSTM layer, same mask) output and gradients", f"max relative {gap:.3g}",
                 f"<= {WDROP_TOL:g}; the mask moves the output ({moved:.3g})", gap <= WDROP_TOL and moved > 1e-3)
    result.figure("weight_drop_cudnn_warned", any("contiguous chunk" in str(w.message) for w in caught))
    if simulated:
        result.note("weight drop: not timed on the simulated device")
        return
    shape = WDROP_SHAPE
    x = torch.randn(shape["steps"], shape["batch"], shape["n_in"], device="cuda")
    probe = torch.randn(shape["steps"], shape["batch"], shape["n_out"], device="cuda")
    times = {}
    for label, wdrop in (("flat", 0.0), ("dropped", 0.5)):   # wdrop 0 in training takes cuDNN's flat path
        layer = _weight_drop_layer(shape["n_in"], shape["n_out"], "cuda", None)
        layer.wdrop = wdrop
        spans = []
        for rep in range(25):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            _drop_pass(layer, x, probe)
            end.record()
            torch.cuda.synchronize()
            if rep >= 5:   # five warm-up calls: cuDNN's plans and the allocator's blocks
                spans.append(start.elapsed_time(end))
        times[label] = sorted(spans)[len(spans) // 2]
    result.figure("weight_drop_ms", {**{k: round(v, 3) for k, v in times.items()}, **shape})


def forward_jacobian(result) -> None:
    """torch.func's forward mode on CUDA against plain reverse-mode autograd on CUDA."""
    import torch

    from audit.bench import picks
    from audit.evaluate.jacobian import jacobian

    for name in (picks.baseline(), picks.latent_mixture()):
        head = _head(name, 16, 300).eval().cuda()
        h = torch.randn(16, generator=torch.Generator().manual_seed(6)).cuda()
        forward, reverse = jacobian(head, h, "forward"), jacobian(head, h, "reverse")
        error = ((forward - reverse).norm() / reverse.norm()).item()
        result.check(f"forward-mode Jacobian on CUDA ({name})", f"{error:.3g}",
                     f"||J_fwd - J_rev|| / ||J_rev|| <= {JACOBIAN_TOL:g}", error <= JACOBIAN_TOL)


def run(result, budget: float, simulated: bool) -> None:
    import time

    from audit.gpucheck import graphcheck, graphpaper
    from audit.gpucheck.common import every_arm, random_corpus
    from audit.train.precision import apply_precision

    apply_precision("fp32")  # TF32 would loosen every tolerance above
    deadline = time.time() + budget
    with tempfile.TemporaryDirectory(prefix="audit-gpu-check-") as tmp:
        corpus = random_corpus(Path(tmp) / "corpus.pt", 500, 4000, 1000, 1000)
        for body, head in every_arm(deadline, result, "checked"):
            compare_run(head, body, corpus, result)
        if result.data.get("incomplete"):
            return
        graphcheck.run(result, corpus, simulated)   # train.cuda_graphs against the eager step
    graphpaper.run(result, simulated, deadline)     # the same at paper size, past validation and the switch
    plif_spread(result)
    weight_drop(result, simulated)
    press_rank(result)
    if simulated:
        # torch.func's wrappers hide the device from the simulation (docs/gpus.md, "The simulated CUDA device")
        result.note("forward-mode Jacobian: not checkable on the simulated device")
    else:
        forward_jacobian(result)
