"""The one build step pyproject.toml cannot declare: the optional C extensions.
`herald.fragment._spool_native` is the spool write path in C (two SHA1s of the same bytes
in one SHA-NI pass, a small group's seal, a round's writes, a streamed body's data sync and early write-back;
see its sources); `herald.spark._scan_native` is a Spark batch read's NDJSON block scan
and UUID columns.
``optional``: where one does not compile, Herald installs without it, hashes with
hashlib (`herald.fragment.spool_sums`), writes from Python (`herald.fragment.whole_writes`)
and scans with numpy (`herald.spark.blocks`)."""

from setuptools import Extension, setup

SPOOL_SOURCES = [f"src/herald/fragment/_spool_{part}.c" for part in ("native", "writes", "frames", "syncs")]

setup(ext_modules=[Extension("herald.fragment._spool_native", SPOOL_SOURCES, extra_compile_args=["-O2"], optional=True),
                   Extension("herald.spark._scan_native", ["src/herald/spark/_scan_native.c"],
                             extra_compile_args=["-O2"], optional=True)])
