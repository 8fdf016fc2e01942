"""GPU acceptance run (``python -m audit gpu-check``): is this node right, and how fast?

Steps, in order (correctness first, so a short allocation still answers "is it right"):
``environment``, ``correctness``, ``syncs``, ``memory``, ``speed``, ``dag``; one module each.
``audit.gpucheck.cli`` plans them into the time given, runs each in its own process and writes
``gpu-check.json`` and ``gpu-check.md`` (``audit.gpucheck.report``).
"""
