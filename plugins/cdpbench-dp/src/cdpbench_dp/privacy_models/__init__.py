"""The budget verifier of the DP anonymizers."""
