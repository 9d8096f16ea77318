"""The one build step pyproject.toml cannot declare: the optional C extension
`herald.fragment._spool_native` (the spool write path in C: two SHA1s of the same bytes
in one SHA-NI pass, a small group's seal, a round's writes, a streamed body's data sync;
see its sources).
``optional``: where it does not compile, Herald installs without it, hashes with
hashlib (`herald.fragment.spool_sums`) and writes from Python (`herald.fragment.whole_writes`)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("herald.fragment._spool_native",
                             ["src/herald/fragment/_spool_native.c", "src/herald/fragment/_spool_syncs.c"],
                             extra_compile_args=["-O2"], optional=True)])
