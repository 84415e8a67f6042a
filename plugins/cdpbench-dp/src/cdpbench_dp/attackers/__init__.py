"""The adversary on noisy counts."""
