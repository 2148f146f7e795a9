"""Shared fixtures: real temporary roots and both protocol eras. Helpers live in `support.py`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import (  # noqa: F401 - re-exported for suites that import helpers from conftest
    REPO,
    call_tool,
    connect,
    make_config,
    server_options,
    snapshot,
    stdio_params,
    text_of,
)


@pytest.fixture(autouse=True, scope="session")
def private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Recovery records and journals of the whole run go to a temporary state directory, never the
    user's own (servers started as subprocesses inherit it)."""
    os.environ["CORETOOLS_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace root with a decoy sibling directory next to it (`<tmp>/root-evil`), which no tool may
    ever read or change."""
    r = tmp_path / "root"
    r.mkdir()
    decoy = tmp_path / "root-evil"
    decoy.mkdir()
    (decoy / "secret.txt").write_text("DECOY SECRET\n")
    return r
