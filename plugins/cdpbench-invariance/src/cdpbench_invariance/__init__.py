"""cdpbench plugin: the invariance family and the collusion (signature intersection) attack."""
