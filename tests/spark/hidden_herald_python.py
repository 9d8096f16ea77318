"""A ``PYSPARK_PYTHON`` for tests: this interpreter as a worker that cannot import Herald.

Every ``sys.path`` entry holding a ``herald`` package is dropped (so only a zip Spark
ships makes it importable), and the top-level modules named in
``$HERALD_TEST_HIDDEN_MODULES`` (comma separated) fail to import, as in an
interpreter that lacks them. Spark runs workers as ``python -m module`` or
``python -c code``; both are passed on.
"""

import os
import runpy
import sys

sys.path[:] = [p for p in sys.path if not os.path.isdir(os.path.join(p or ".", "herald"))]
HIDDEN = {m for m in os.environ.get("HERALD_TEST_HIDDEN_MODULES", "").split(",") if m}


class _Hidden:
    @staticmethod
    def find_spec(name, path=None, target=None):  # noqa: ARG004 — the finder protocol
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None


sys.meta_path.insert(0, _Hidden)
args = sys.argv[1:]
while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
    args = args[1:]  # interpreter flags such as -u
if args[0] == "-c":
    sys.argv = ["-c", *args[2:]]
    exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
else:
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
