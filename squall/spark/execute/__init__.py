"""Running micro-batches on executors: the stage functions Spark runs in its Python
workers (``mapInArrow``), the bolt and spout tasks' wiring and snapshots, the packets
between them, and the reports of a micro-batch's tasks (the driver side is
:mod:`squall.spark.streaming`)."""
