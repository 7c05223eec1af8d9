"""Framework drivers: deploy, grow and shrink real MR-clusters (Spark standalone + HDFS) over SSH.

Modules: ``dists`` (obtain the lab's distributions), ``render`` (configs from templates, pure),
``metrics`` (parsers of the daemons' JSON, pure), ``base`` (the driver interface and the
registry of kinds), ``spark_hdfs`` (the Spark standalone + HDFS driver), ``registry``
(registered frameworks).
"""
