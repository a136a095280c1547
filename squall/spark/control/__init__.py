"""What the cluster uses to steer its runs: the run directory's files, the per-process
cache of live tasks, capacity, and the checks of a checkpoint's location and shape (the
queries themselves are started by :mod:`squall.spark.streaming`)."""
