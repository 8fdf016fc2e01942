"""bottleneck-audit: train softmax-bottleneck heads across seeds and audit the published claims."""

__version__ = "0.1.0"
