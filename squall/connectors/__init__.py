"""Connectors: spouts, bolts and Trident states over real systems.

* :mod:`squall.connectors.redis`: Redis Streams (reliable and Trident spouts, a sink
  bolt).
* :mod:`squall.connectors.files`: directories of files (a reliable spout, a sink bolt,
  a transactional Trident spout).
* :mod:`squall.connectors.postgres`: PostgreSQL through psycopg 3 (a Trident map
  state, an insert bolt, a lookup bolt); needs ``pip install 'squall[postgres]'``.

Each connector states its delivery guarantee in its docstring. Every one runs on both
engines: its objects carry only options (addresses, names, sizes), open their
connections in the task that uses them, and so pickle to Spark's executors.
"""
