"""Bodies: what turns token ids into the features a head reads, by name or import path.

The protocol and the registry are ``registry`` (``BODIES``, ``body_class``, ``build_body``,
``BodyProtocol``, ``BodyDefaults``); the torch-free planning traits are ``traits``; one file per
built-in body (``awd_lstm``, ``transformer``). The torch parts load on first use (PEP 562
``__getattr__``), so that ``audit.model.bodies.traits`` imports without torch: Snakemake
evaluates every job's resources while it parses the workflow (tests/test_workflow.py).
"""

from __future__ import annotations

from audit.model.importpath import lazy_exports

# public name -> the submodule that defines it (imported, with torch, on first access)
_LAZY = {
    "BODIES": "registry", "BodyProtocol": "registry", "BodyDefaults": "registry", "body_class": "registry",
    "build_body": "registry", "body_config": "registry", "SectionConfig": "registry",
    "AWDLSTMBody": "awd_lstm", "TransformerBody": "transformer",
    "AWDLSTMConfig": "awd_lstm", "TransformerConfig": "transformer",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
