"""The published record audited from its own numbers (``audit/data/published.csv``).

``summaries``: statistics from summary rows (mean, SD, n per arm); ``reproduce``: does a printed
p-value follow from the printed summaries; ``evidence``: the three ``published_*`` tables.
"""
