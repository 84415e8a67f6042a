"""The KSAA package's data sets (``cdpbench.datasets``): ``adult_sequential`` and ``bkseq_sequential``."""
