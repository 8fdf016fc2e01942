"""Building blocks of the mixture heads (MoS, MoC, Mixtape) that need no parameters (their
locked dropout: ``audit.model.kernels.dropout``)."""

from __future__ import annotations

import torch


def sigmoid_tree(pre: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Four gate weights from three sigmoid pre-activations (Mixtape's sigmoid tree).

    pi_1 = g1 g2, pi_2 = g1 (1 - g2), pi_3 = (1 - g1) g3, pi_4 = (1 - g1)(1 - g3) with
    g_j = sigmoid(a_j); they are positive and sum to one without a softmax over K.

    Args:
        pre: pre-activations with 3 entries along ``dim``.
        dim: the gate axis.

    Returns:
        Gate weights, the shape of ``pre`` with 4 entries along ``dim``.
    """
    g1, g2, g3 = torch.sigmoid(pre).unbind(dim)
    return torch.stack((g1 * g2, g1 * (1 - g2), (1 - g1) * g3, (1 - g1) * (1 - g3)), dim=dim)


def mixture_log_probs(component_logits: torch.Tensor, log_prior: torch.Tensor) -> torch.Tensor:
    """log sum_k pi_k softmax(logits_k), computed entirely in log space.

    Mixing with logsumexp over log_softmax terms (as Mesh-TensorFlow's MixtureOfSoftmaxes does)
    needs no epsilon: the reference code added 1e-8 to p or took log(p) directly, which can give
    -inf in float32. Plain autograd (the Jacobian differentiates it in forward mode); training
    reads the mixture at the targets alone, ``mixture_target_log_probs``.

    Args:
        component_logits: logits of each expert, shape (T, B, K, V).
        log_prior: log mixture weights, shape (T, B, K), normalised over K.

    Returns:
        Log-probabilities, shape (T, B, V).
    """
    log_components = torch.log_softmax(component_logits, dim=-1)
    return torch.logsumexp(log_components + log_prior.unsqueeze(-1), dim=-2)


def mixture_target_log_probs(component_logits: torch.Tensor, log_prior: torch.Tensor,
                             targets: torch.Tensor) -> torch.Tensor:
    """log sum_k pi_k softmax(logits_k)_y at the target words y alone: the training loss's input.

    Training reads log-P only at the targets, so the mixture over K is formed for one word per
    position instead of all V (the full (T, B, V) mixture and its backward made a default-size
    MoS step cost 2.4 times a softmax's; now 1.8 times). Same function as
    ``mixture_log_probs(...).gather(-1, y)``, with a hand-written backward (``_TargetMixture``);
    inputs in half precision are mixed in float32 (the log-sum-exps lose too much in 8 bits of
    mantissa) and their gradients handed back in their own dtype.

    Args:
        component_logits: logits of each expert, shape (T, B, K, V).
        log_prior: log mixture weights, shape (T, B, K), normalised over K.
        targets: word ids, shape (T, B).

    Returns:
        log p(y), shape (T, B), float32 or wider.
    """
    return _TargetMixture.apply(component_logits, log_prior, targets)


class _TargetMixture(torch.autograd.Function):
    """out = log sum_k exp(r_k), r_k = log pi_k + l_ky - logsumexp(l_k): forward and backward.

    With q_k = exp(r_k - out), the posterior of expert k given the target y:

        d out / d log pi_k = q_k
        d out / d l_kx     = q_k ([x = y] - softmax(l_k)_x)

    The forward keeps softmax(l_k) (one (T, B, K, V) tensor, the size autograd kept for the full
    mixture), so the backward needs no exponential over V.
    """

    @staticmethod
    def forward(ctx, logits, log_prior, targets):
        ctx.dtypes = (logits.dtype, log_prior.dtype)
        wide = torch.promote_types(logits.dtype, torch.float32)
        logits, log_prior = logits.to(wide), log_prior.to(wide)
        top = logits.amax(dim=-1, keepdim=True)
        softmax = torch.sub(logits, top).exp_()
        total = softmax.sum(dim=-1, keepdim=True)
        softmax.div_(total)
        index = targets[..., None, None].expand(*logits.shape[:-1], 1)
        r = logits.gather(-1, index).sub_(top).sub_(total.log_()).squeeze(-1).add_(log_prior)
        out = torch.logsumexp(r, dim=-1)
        ctx.save_for_backward(softmax, r, out, index)
        return out

    @staticmethod
    def backward(ctx, grad):
        softmax, r, out, index = ctx.saved_tensors
        gq = torch.sub(r, out.unsqueeze(-1)).exp_().mul_(grad.unsqueeze(-1))     # g q_k, (T, B, K)
        grad_logits = softmax.mul(gq.unsqueeze(-1).neg())
        grad_logits.scatter_add_(-1, index, gq.unsqueeze(-1))
        return grad_logits.to(ctx.dtypes[0]), gq.to(ctx.dtypes[1]), None
