"""Group-sequential seeds (docs/statistics.md "Sequential design").

``schedule``: the seeds schedule of a study (torch- and scipy-free: Snakemake reads it at parse
time); ``boundaries``: alpha spending, boundaries, repeated p-values and CIs; ``stopping``: the
vectorised stop rules shared by the interim analysis and the simulation; ``interim``: the
``python -m audit sequential`` verb; ``history``: what the audit reports of the stages.
"""
