"""The Dirichlet synthetic study (after Ganea et al. 2019): which head can fit arbitrary P*?

N contexts and M outcomes; every true distribution P*(.|c) is a symmetric Dirichlet(alpha)
draw. Each context has its own free embedding (size d_in), the M outcome embeddings (M x d) are
shared and tied to the head's decoder, so the only bottleneck left is the head's map from a
d-sized context to log-probabilities; a free context embedding removes the LSTM (the "context
embedding bottleneck") from the comparison. Each head is fitted by full-batch Adam on the
cross-entropy to P* for a fixed number of steps, then scored by mode matching (share of
contexts whose argmax agrees with P*'s), cross-entropy and KL to P*, and the Press, epsilon
and entropy ranks of its fitted log-P (N x M), with the true log-P's ranks beside them.

Choices made here (not the paper's):
- The context embedding size d_in equals d for every head, including the projecting mixture
  heads (mos/moc/mixtape, which could take d_in != d), so heads compare at a fixed context size.
- P* is drawn in log space, exactly and without any floor: for Y ~ Gamma(alpha + 1) and
  U ~ Uniform(0, 1], Y U^(1/alpha) ~ Gamma(alpha) (Marsaglia and Tsang's boost), so
  log X = log Y + log(U) / alpha is finite even where X itself underflows float64 (for
  alpha = 0.01 about one draw in a thousand is below 1e-308), and log P* = log X - logsumexp.
  The same seed gives the same (Y, U) stream for every alpha, heads and d: paired comparisons.
- Init: context embeddings N(0, 1), outcome embeddings N(0, 1/d) (initial logits of unit
  variance); the head's own layers keep PyTorch's init. torch is seeded with the fit's seed.
- Ranks use float32's eps in the Press tolerance for both matrices (the fit is float32).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn as nn
from scipy.special import logsumexp

from audit.evaluate import spectrum
from audit.errors import AuditError


# ----- targets and metrics -----------------------------------------------------------------
def sample_log_targets(contexts: int, outcomes: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """log P* for ``contexts`` independent symmetric Dirichlet(alpha) draws, in float64.

    Args:
        contexts, outcomes: N and M.
        alpha: concentration (> 0).
        rng: seeded generator; consumed in a fixed order (Y first, then U).

    Returns:
        Array (N, M), finite, each row with logsumexp 0.
    """
    if alpha <= 0:
        raise AuditError(f"synthetic: alpha must be > 0, got {alpha}")
    log_y = np.log(rng.standard_gamma(alpha + 1.0, size=(contexts, outcomes)))  # Y >= tiny > 0
    log_u = np.log1p(-rng.random((contexts, outcomes)))  # 1 - [0, 1) = (0, 1]: never log(0)
    log_x = log_y + log_u / alpha
    return log_x - logsumexp(log_x, axis=1, keepdims=True)


def fit_metrics(log_q: np.ndarray, log_p: np.ndarray) -> dict:
    """Mode matching, cross-entropy, entropy and KL of fitted Q against true P* (means over rows).

    Args:
        log_q: fitted log-probabilities (N, M).
        log_p: true log-probabilities (N, M), finite.

    Returns:
        dict with mode_match (share of rows whose argmax agrees), ce = E_c[-sum P* log Q],
        entropy = E_c[H(P*)] and kl = E_c[KL(P* || Q)], all in nats; kl is computed directly
        (not as ce - entropy, which loses digits when both are large).
    """
    log_q = np.asarray(log_q, dtype=np.float64)
    log_p = np.asarray(log_p, dtype=np.float64)
    p = np.exp(log_p)  # underflows to exactly 0 only where the term is negligible
    with np.errstate(invalid="ignore"):  # 0 * -inf: the outcome has no mass, term is 0
        ce_terms = np.where(p > 0, -p * log_q, 0.0)
    return {
        "mode_match": float(np.mean(log_q.argmax(axis=1) == log_p.argmax(axis=1))),
        "ce": float(ce_terms.sum(axis=1).mean()),
        "entropy": float((-p * log_p).sum(axis=1).mean()),
        "kl": float(np.where(p > 0, p * (log_p - log_q), 0.0).sum(axis=1).mean()),
    }


def rank_metrics(log_p: np.ndarray, prefix: str = "") -> dict:
    """Press, entropy and epsilon ranks of an (N, M) log-P matrix, keyed
    ``audit.evaluate.ranks.rank_keys(prefix)`` (``audit.evaluate.spectrum.rank_summary``)."""
    return spectrum.rank_summary(spectrum.stream_spectrum([np.asarray(log_p)]), prefix)


# ----- model and fit -----------------------------------------------------------------------
class ContextModel(nn.Module):
    """Free context embeddings (N x d) read by a registered head over tied outcome embeddings."""

    def __init__(self, head: str, options: dict, contexts: int, outcomes: int, d: int,
                 decoder_bias: bool = True):
        super().__init__()
        from audit.model.heads import HeadSpec, build_head

        self.context = nn.Parameter(torch.randn(contexts, d))
        self.outcome = nn.Embedding(outcomes, d)
        with torch.no_grad():
            self.outcome.weight.normal_(0.0, 1.0 / math.sqrt(d))
        # d_in = d: every head sees a context of the same size (see the module docstring)
        self.head = build_head(head, HeadSpec(d_in=d, embedding=self.outcome, options=dict(options),
                                              decoder_bias=decoder_bias))

    def forward(self) -> torch.Tensor:
        """Log-probabilities (N, M): the N contexts as one sequence of length 1, batch N."""
        return self.head(self.context.unsqueeze(0))[0]


class Adam:
    """Adam (Kingma and Ba 2015) with torch.optim.Adam's exact update (betas 0.9, 0.999, eps
    1e-8, no weight decay), for parameter groups ``[{"params": [...], "lr": lr}, ...]``.

    Why not torch.optim.Adam: constructing any torch optimizer imports torch._dynamo, about
    1.5 s of CPU, which was a third of each short fit job's time (one process per fit).
    """

    def __init__(self, groups: list[dict], betas=(0.9, 0.999), eps: float = 1e-8):
        self.groups = [{"params": list(g["params"]), "lr": float(g["lr"])} for g in groups]
        self.betas, self.eps, self.steps = betas, eps, 0
        self.state = {id(p): (torch.zeros_like(p), torch.zeros_like(p)) for g in self.groups for p in g["params"]}

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        beta1, beta2 = self.betas
        self.steps += 1
        correction1, correction2_sqrt = 1 - beta1 ** self.steps, math.sqrt(1 - beta2 ** self.steps)
        for group in self.groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                avg, avg_sq = self.state[id(p)]
                avg.lerp_(p.grad, 1 - beta1)
                avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                p.addcdiv_(avg, (avg_sq.sqrt() / correction2_sqrt).add_(self.eps), value=-group["lr"] / correction1)


def fit(settings: dict, log=print) -> dict:
    """Fit one head to one Dirichlet draw and score it.

    Args:
        settings: one job's settings (see ``fit_settings``): head, registry_head, options, d,
            alpha, seed, contexts, outcomes, steps, lr, decoder_bias, device, threads.
        log: progress printer.

    Returns:
        The record written by ``fit`` (settings, status, metrics, true ranks, loss curve).
    """
    s = settings
    from audit.device import SYNC_EVERY, resolve_device

    torch.set_num_threads(int(s["threads"]))
    device = resolve_device(s["device"])
    started = time.perf_counter()
    log_p = sample_log_targets(s["contexts"], s["outcomes"], float(s["alpha"]), np.random.default_rng(s["seed"]))
    torch.manual_seed(s["seed"])
    model = ContextModel(s["registry_head"], s["options"], s["contexts"], s["outcomes"], s["d"],
                         s["decoder_bias"]).to(device)
    target = torch.from_numpy(np.exp(log_p)).float().to(device)  # P*; float32 underflow adds ~0
    special = model.head.extra_param_groups()
    special_ids = {id(p) for group in special for p in group["params"]}
    main = [p for p in model.parameters() if p.requires_grad and id(p) not in special_ids]
    optimizer = Adam([{"params": main, "lr": s["lr"]}] + special)
    entropy = float((-np.exp(log_p) * log_p).sum(axis=1).mean())
    status, error = "ok", None
    every = max(1, s["steps"] // 20)
    curve_steps = [step for step in range(1, s["steps"] + 1) if step % every == 0 or step == s["steps"]]
    # The loss and the divergence check stay on the device: the curve's losses are written into a
    # device tensor and the first non-finite step is remembered there, read every SYNC_EVERY steps
    # on a GPU (per step on the CPU, where reading is free) and once at the end, so a fit of N steps
    # syncs about N / SYNC_EVERY times. A diverged fit fails at its first bad step either way.
    check_every = 1 if device.type == "cpu" else SYNC_EVERY
    curve_losses = torch.zeros(len(curve_steps), device=device)
    first_bad = torch.full((), -1, dtype=torch.int64, device=device)
    model.train()  # dropout options of a head apply while fitting, as they would in training
    for step in range(1, s["steps"] + 1):
        model.zero_grad(set_to_none=True)
        loss = -(target * model()).sum(dim=1).mean()
        first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), step, first_bad)
        if step % check_every == 0 and int(first_bad) >= 0:
            break
        loss.backward()
        optimizer.step()
        if step % every == 0 or step == s["steps"]:
            curve_losses[curve_steps.index(step)] = loss.detach()  # train KL (dropout on, before the step)
    bad = int(first_bad)
    if bad >= 0:
        status, error = "failed", f"non-finite loss at step {bad}"
        log(f"fit failed: {error}")
    curve = [[step, loss - entropy] for step, loss in zip(curve_steps, curve_losses.tolist())
             if bad < 0 or step < bad]
    model.eval()
    with torch.no_grad():
        log_q = model().double().cpu().numpy()
    record = {"settings": s, "status": status, "error": error,
              "n_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
              "kl_curve": curve}
    if status == "ok" and not np.all(np.isfinite(log_q)):
        record.update(status="failed", error="non-finite fitted log-probabilities")
    if record["status"] == "ok":
        record.update(fit_metrics(log_q, log_p))
        record.update(rank_metrics(log_q.astype(np.float32)))
    record.update(rank_metrics(log_p, prefix="true_"))
    record["seconds"] = time.perf_counter() - started
    log(f"{s['head']} d={s['d']} alpha={s['alpha']} seed={s['seed']}: {record['status']}"
        + (f" | mode match {record['mode_match']:.3f} | KL {record['kl']:.4f} | Press rank "
           f"{record['press_rank']} (true {record['true_press_rank']})" if record["status"] == "ok" else "")
        + f" | {record['seconds']:.1f} s")
    return record
