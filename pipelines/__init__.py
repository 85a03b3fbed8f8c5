"""Data pipelines on Spark that ship with qmgr (see docs/spark.md).

* :mod:`pipelines.feeder` sends sample order events (JSON) to ``orders``.
* :mod:`pipelines.order_totals`, a streaming job: running totals per
  customer, each update sent to ``customer-totals`` exactly once.
* :mod:`pipelines.delivery_report`, a batch job: delivery counts from the
  ``orders;journal`` queue and dead-letter classes from the dead-letter queues.
* :mod:`pipelines.run` runs the three on local Spark (``make pipeline``).

The two jobs are single files that need only ``pyspark`` and ``qmgr``, so
that ``spark-submit`` can run them on a cluster as they are.
"""
