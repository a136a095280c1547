"""The ``squall`` command line: run and inspect topologies defined in Python files.

``squall run FILE.py[:NAME]`` runs a topology on :class:`~squall.LocalCluster` with a
live metrics table; ``squall info FILE.py[:NAME]`` shows its components and task plan;
``squall version`` prints the version. The entry point is :func:`squall.cli.main.main`.
"""
