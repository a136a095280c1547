"""What the cluster uses to steer its runs: the run directory's files, the per-process
cache of live tasks, and capacity."""
