"""gpu-check's DAG step: what it says of a Snakemake run cut off by the time (the whole step runs
in tests/gpucheck/test_acceptance.py on the simulated device)."""

from audit.gpucheck import dag


def test_progress_reads_the_last_count_snakemake_printed():
    log = ("Building DAG of jobs...\n3 of 30 steps (10%) done\nSelect jobs to execute...\n"
           "12 of 30 steps (40%) done\n[Fri Nov 27 01:45:02 2026]\nrule evaluate:\n")
    assert dag.progress(log) == "12 of 30 jobs done"
    assert dag.progress("Building DAG of jobs...\n") == "no job done"
    assert dag.progress(None) == "no job done"
    # a count inside another line (a job's own log echoed) is not Snakemake's
    assert dag.progress("rule x: 5 of 9 steps (55%) done\n") == "no job done"

