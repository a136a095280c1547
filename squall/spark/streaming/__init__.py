"""The streaming queries of a topology, on the Spark driver: starting and steering them
(:mod:`.queries`), the ``foreachBatch`` driver of their micro-batches (:mod:`.driver`,
with its retries) and the pipelines it runs a micro-batch with (:mod:`.corepipeline`,
:mod:`.batchpipeline`), which cut each stage's input from the frames before it
(:mod:`.frames`) and run Spark's jobs (:mod:`.microbatch`)."""
