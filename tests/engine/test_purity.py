"""The engine is a pure module: importing it loads no Django and does no I/O."""

import subprocess
import sys


def test_engine_imports_nothing_from_django() -> None:
    code = (
        "import sys; import flows_app.engine, flows_app.graph, flows_app.model; "
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
