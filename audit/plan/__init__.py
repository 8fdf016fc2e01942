"""What a study will cost and need before it runs: SLURM runtime and memory per job
(``resources``), GPU memory and runs per GPU (``memory``, ``python -m audit plan-memory``), what a
token costs each body (``bodycost``), parameter counts (``params``) and the data files a GPU node
must carry (``datafiles``, ``python -m audit data-files``). Torch-free where Snakemake calls it
while planning (``resources``, ``memory``, ``bodycost``): heads and bodies answer through their
planning traits (``audit.model.heads.traits``, ``audit.model.bodies.traits``).
"""
