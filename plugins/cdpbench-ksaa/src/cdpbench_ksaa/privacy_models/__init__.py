"""The KSAA package's privacy models (``cdpbench.privacy_models``): ``k_linkability``, ``k_diversity`` and ``j_similarity_join``."""
