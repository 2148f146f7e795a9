"""The SDK's OpenTelemetry middleware: kept, with its spans, when a tracer provider is configured before the
server starts; dropped when none is (each span would be a no-op that still costs). Each case runs in its own
interpreter: the OpenTelemetry API lets a process set its provider only once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, anyio
sys.path.insert(0, {tests!r})
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, INVALID_SPAN_CONTEXT

names = []

class Tracer(trace.Tracer):
    def start_span(self, name, *args, **kwargs):
        names.append(name)
        return NonRecordingSpan(INVALID_SPAN_CONTEXT)

    def start_as_current_span(self, name, *args, **kwargs):
        names.append(name)
        return trace.use_span(NonRecordingSpan(INVALID_SPAN_CONTEXT))

class Provider(trace.TracerProvider):
    def get_tracer(self, *args, **kwargs):
        return Tracer()

if sys.argv[1] == "configured":
    trace.set_tracer_provider(Provider())

from pathlib import Path
from mcp import Client
from coretools.server.app import build_server
from support import make_config

async def main():
    server, _ = build_server(make_config([Path(sys.argv[2])]))
    print([type(m).__name__ for m in server.middleware])
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("list_directory", {{"path": sys.argv[2]}})
        assert not result.is_error
    print(sorted(set(names)))

anyio.run(main)
"""


@pytest.mark.parametrize(("setup", "middleware", "spans"), [
    ("configured", "['OpenTelemetryMiddleware']", "'tools/call list_directory'"),
    ("unset", "[]", "[]"),
])
def test_spans_only_where_a_provider_is_configured(tmp_path: Path, setup: str, middleware: str, spans: str) -> None:
    script = SCRIPT.format(tests=str(REPO / "tests"))
    done = subprocess.run([sys.executable, "-c", script, setup, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, cwd=REPO)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    listed, recorded = done.stdout.strip().splitlines()[-2:]
    assert listed == middleware
    assert spans in recorded
