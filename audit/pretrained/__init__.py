"""Pretrained multi-seed suites (PolyPythias) as an evidence source (issue 55).

A study's ``pretrained:`` section names a suite's models (sizes), seeds, checkpoints (Git
revisions) and the text to evaluate on. One Snakemake job per (model, seed, checkpoint) loads the
checkpoint as data (``load``: no remote code, weights-only) and measures it with the evaluation's
own code (``measure``); ``table`` gathers the jobs into a per-checkpoint table and a runs table of
the final checkpoint in the format of a trained study's ``runs.csv`` (with the saturation
measures over the last checkpoints), which a study names under ``evidence:``. ``suite`` expands
the section (torch-free: Snakemake parses with it), ``plan`` prices each job, ``claims`` writes
the per-size claims, ``example`` builds a small constructed suite in the Hugging Face layout.
"""
