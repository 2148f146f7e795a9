"""Fixtures for the client bridge tests: real stdio MCP servers and the fake Gemini endpoint."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fake_gemini import FakeGemini  # noqa: E402

TOY_SERVER = HERE / "servers" / "toy_server.py"
BROKEN_SERVER = HERE / "servers" / "broken_server.py"
DATA = HERE / "data"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


def toy(name: str, *extra: str, **entry: Any) -> dict[str, Any]:
    """An ``mcpServers`` entry that starts the toy server under ``name``."""
    return {"command": sys.executable, "args": [str(TOY_SERVER), "--name", name, *extra], **entry}


def broken(variable: str = "TOY_TOKEN_THAT_IS_NEVER_SET") -> dict[str, Any]:
    """A server that writes a reason to stderr and exits with code 3 before the handshake."""
    return {"command": sys.executable, "args": [str(BROKEN_SERVER), variable]}


def write_config(directory: Path, servers: dict[str, Any], key: str = "mcpServers") -> Path:
    path = directory / "mcp.json"
    path.write_text(json.dumps({key: servers}), encoding="utf-8")
    return path


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (zombies are dead but not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            state = file.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.fixture
def fake_gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake
