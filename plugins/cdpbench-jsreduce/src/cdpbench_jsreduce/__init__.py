"""cdpbench-jsreduce: JS-reduce (Riboni, Pareschi, Bettini, IEEE TDSC 9(3), 2012)."""
