"""Herald: Gazette's journals, fragments and exactly-once messages in Python, with
pipelines on Apache Spark.

Packages (docs/modules.md maps every module): ``protocol`` and ``message`` are pure vocabulary;
``fragment`` holds spools, the cover set and stores; ``keyspace`` holds specs;
``broker`` is the asyncio server; ``client`` talks to it; ``spark`` is the PySpark
data source; ``pipelines`` are jobs built on it; ``cli`` is the ``herald`` command.
"""

__version__ = "0.1.0"
