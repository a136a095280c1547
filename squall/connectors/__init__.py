"""Connectors: spouts, bolts and states over real systems, each system's in its own
package (its spouts, bolts, Trident state and stateful-bolt state provider).

* :mod:`squall.connectors.redis`: Redis (reliable and Trident spouts over streams, a
  sink bolt, a Trident map state, the ``redis`` state provider).
* :mod:`squall.connectors.files`: directories of files (a reliable spout, a sink bolt,
  a transactional Trident spout).
* :mod:`squall.connectors.postgres`: PostgreSQL through psycopg 3 (a Trident map
  state, an insert bolt, a lookup bolt, the ``postgres`` state provider); needs
  ``pip install 'squall[postgres]'``.
* :mod:`squall.connectors.sqlite`: SQLite files (a Trident map state, the ``sqlite``
  state provider).
* :mod:`squall.connectors.kafka`: Kafka (a spout, a bolt, a Trident spout and state).

Each connector states its delivery guarantee in its docstring. Every one runs on both
engines: its objects carry only options (addresses, names, sizes), open their
connections in the task that uses them, and so pickle to Spark's executors.
"""
