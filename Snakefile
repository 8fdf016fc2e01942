# bottleneck-audit: train every head across seeds, evaluate, test the published claims, report.
# Run: snakemake --cores all [--resources gpu=1] [--configfile configs/<study>.yaml]
from snakemake.utils import min_version

min_version("8.10")

# No `configfile:` directive: Snakemake would merge a --configfile study over the default one,
# so a study would silently inherit keys it does not set. rules/common.smk loads
# configs/default.yaml only when no --configfile is given.

include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/sequential.smk"
include: "rules/stats.smk"
include: "rules/synthetic.smk"
include: "rules/pretrained.smk"
include: "rules/report.smk"


rule all:
    input:
        f"{REPORTS}/audit.html",
        synthetic_targets(),
        pretrained_targets(),
