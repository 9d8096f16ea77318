"""The one build step pyproject.toml cannot declare: the optional C extension
`herald.fragment._sha1x2` (two SHA1s of the same bytes in one SHA-NI pass; see its
source). ``optional``: where it does not compile, Herald installs without it and
hashes with hashlib (`herald.fragment.spool_sums`)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("herald.fragment._sha1x2", ["src/herald/fragment/_sha1x2.c"],
                             extra_compile_args=["-O2"], optional=True)])
