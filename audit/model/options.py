"""The options every head accepts, with their defaults: the one place they are written.

Torch-free, so that config validation and Snakemake's parse of the workflow can check head
names and options without importing torch; ``audit.model.heads`` builds its classes on it.
"""

from audit.schema import schema_defaults

# softmax_matched's options: the arm whose parameter count to match, and how (the schema's
# $defs/softmax_matched_options, where their defaults live)
MATCHED_OPTIONS = {"match": None, **schema_defaults("softmax_matched_options", unfilled=True)}

HEAD_OPTIONS: dict[str, dict] = {
    "softmax": {},
    "softmax_matched": MATCHED_OPTIONS,
    "sigsoftmax": {},
    "gss": {"c": 0.0, "k": 2.0},
    "plif": {"knots": 100_000, "bound": 20.0, "w_scale": 1.0, "lr": 0.02, "seed": None},
    "plif_frozen": {"knots": 100_000, "bound": 20.0, "w_scale": 1.0, "lr": 0.02, "seed": None},
    "mos": {"experts": 15, "dropoutl": 0.29},
    "mos_uniform": {"experts": 15, "dropoutl": 0.29},
    "moc": {"experts": 15, "dropoutl": 0.29},
    "mixtape": {"experts": 4, "gate_embedding_size": 160, "frequent_token_fraction": 0.1,
                "dropoutc": 0.0, "dropoutg": 0.0, "noise_std": 0.0},
}

# The built-in bodies (audit.model.bodies.BODIES), readable without torch.
BODY_NAMES = ("awd_lstm", "transformer")
