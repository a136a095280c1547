"""Running micro-batches: the ``foreachBatch`` driver on the Spark driver, the stage
functions Spark runs in its Python workers (``mapInArrow``), the packets between them,
and the figures and retries of a micro-batch."""
