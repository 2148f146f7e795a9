"""Shared fixtures: real temporary roots and both protocol eras. Helpers live in `support.py`."""

from __future__ import annotations

import functools
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


# Tests that assert a wall-clock bound of a few seconds or less on work that needs the CPU: under
# pytest-xdist they run one after another on one worker, never two at once (node id prefixes).
SERIAL = (
    "tests/attacks/test_edit_attacks.py::test_fuzzy_search_",
    "tests/attacks/test_edit_attacks.py::test_a_typo_in_a_block_",
    "tests/attacks/test_edit_attacks.py::test_syntax_check_",
    "tests/attacks/test_hostile_pages.py::",
    "tests/sandbox/test_path_hints.py::test_a_huge_directory_is_read_boundedly",
    "tests/sandbox/test_pattern_engine.py::test_hostile_patterns_match_in_linear_time",
    "tests/sandbox/test_patterns.py::",
    "tests/tools/test_placeholders.py::test_scan_is_linear_on_big_inputs",
    "tests/tools/test_replace_recovery.py::test_near_miss_corpus_recovered_and_never_wrong",
    "tests/tools/test_shell_background.py::",
    "tests/tools/test_syntax_check.py::test_cost_on_a_60_kb_file_is_small",
)


@functools.cache
def _has_module_fixture(module: str) -> bool:
    try:
        return 'scope="module"' in (REPO / module).read_text()
    except OSError:
        return False


def _xdist_scope(nodeid: str) -> str:
    """The unit pytest-xdist hands to one worker: the SERIAL tests together; each module with a
    module-scoped fixture (a server, a corpus, a measurement) whole, so it is built once; any other test
    alone."""
    if nodeid.startswith(SERIAL):
        return "serial"
    module = nodeid.split("::", 1)[0]
    return module if _has_module_fixture(module) else nodeid


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: two workers per core, as the tests spend about half their time waiting on subprocesses
    and timers. PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(2 * cores, 16)


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201 - xdist's types
    # Not `--dist loadgroup` with xdist_group marks: on pytest 9.2 it silently stops grouping
    # (pytest-dev/pytest-xdist#1386).
    from xdist.scheduler import LoadScopeScheduling

    class Scheduler(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _xdist_scope(nodeid)

    return Scheduler(config, log)
