"""Statistics of the audit, computed from the runs table alone (see docs/statistics.md).

Modules: ``io`` (inputs, settings, atomic writes), ``tests`` (two-sample tests, effect sizes,
TOST, power), ``resample`` (seeded bootstrap and permutations), ``multiplicity`` (NaN-safe Holm),
``comparisons``, ``correlations``, ``wordsim``, ``claims`` (one table each) and ``cli``.
"""
