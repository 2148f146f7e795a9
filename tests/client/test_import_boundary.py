"""The bridge depends on ``mcp`` only: importing it must not load the server side or google-genai."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import coretools.client
import coretools.client.cli
import coretools.client.loop
loaded = sorted(m for m in sys.modules if m.startswith(("coretools.server", "coretools.tools", "google.genai")))
print(json.dumps(loaded))
"""


def test_client_never_imports_the_server_side_or_genai() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_the_probe_would_see_a_server_import() -> None:
    """Guard against a probe that cannot fail: importing a server module is noticed."""
    probe = PROBE.replace("import coretools.client.loop", "import coretools.client.loop\nimport coretools.server")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "coretools.server" in json.loads(done.stdout)
