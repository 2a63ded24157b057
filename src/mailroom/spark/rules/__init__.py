"""The Spark check of each property of ``mailroom.trace.properties``, row for row like the
reference checks: ``order`` (integrity, FIFO, causal, total order, liveness), ``views``
(the group membership properties), ``clock``, and ``records`` (the events a trace
records wrongly, as invalid rows). Each check is a function of the persisted tables
(``mailroom.spark.tables.Tables``) that returns violation rows; the registry names it.
"""
