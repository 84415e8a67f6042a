"""cdpbench-bcf: correspondence attacks on cumulative releases and the BCF-anonymizer (Fung, Wang,
Fu, Pei, EDBT 2008). See the package README for what each module implements."""
