"""Spouts as Spark streaming sources (Python Data Source API): the ``DataSource``, a
reader per source kind, the spout log that makes a batch replay identically, and the
query's offset log."""
