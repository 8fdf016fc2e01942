"""Output heads: the protocol (``base``), one file per family, their torch-free traits
(``traits``) and the registry (``registry``).

``HEADS`` maps each built-in name to its class; ``head_class`` also resolves an import path
"pkg.mod:Class" (a head from outside the project, docs/heads.md) and ``build_head`` builds
either. The torch parts load on first use (PEP 562 ``__getattr__``), so that
``audit.model.heads.traits`` (what planning and config validation read) imports without torch:
Snakemake evaluates every job's resources while it parses the workflow (tests/test_workflow.py).
"""

from __future__ import annotations

from audit.model.importpath import lazy_exports

# public name -> the submodule that defines it (imported, with torch, on first access)
_LAZY = {
    "HEADS": "registry", "build_head": "registry", "head_class": "registry",
    "Head": "base", "HeadDefaults": "base", "HeadProtocol": "base", "HeadSpec": "base", "OPTIONAL_MEMBERS": "base",
    "Softmax": "softmax", "SoftmaxMatched": "softmax",
    "SigSoftmax": "elementwise", "GSS": "elementwise", "PLIF": "elementwise", "PLIFFrozen": "elementwise",
    "MoS": "mixtures", "MoC": "mixtures", "MoSUniform": "mixtures", "Mixtape": "mixtures",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
