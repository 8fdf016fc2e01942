"""Kernels: the building blocks of the heads and bodies, plain functions on tensors.

PLIF's piecewise-linear map (``plif``), GSS's gated log-softmax (``gss``), the mixtures' log-P
and gates (``mixtures``), the cache-sized row blocks of the element-wise maps (``blocked``) and locked
dropout (``dropout``). No registry and no names: a head or body (``audit.model.heads``,
``audit.model.bodies``) composes them, and tests pin their numbers one by one.
"""
