"""Shared fixtures: real temporary roots and both protocol eras. Helpers live in `support.py`."""

from __future__ import annotations

import fnmatch
import functools
import os
import sys
from pathlib import Path

import pytest

# Every run caches bytecode, whatever PYTHONDONTWRITEBYTECODE says: the suite starts hundreds of Python
# processes, and each would otherwise compile coretools and its dependencies again (~0.8 s of CPU each).
# Python checks a cached file against its source before using it. Set before the imports below, so this
# process caches what it imports; workers and the processes the tests start inherit the environment.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

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
    "tests/sandbox/test_patterns.py::",
    "tests/tools/test_shell_background.py::",
)


# The units (see `_xdist_scope`) that take longest, longest first. Each starts at once on a worker that has
# nothing queued behind it, so no long unit begins late and stretches the end of the run; the other units
# follow, largest first, as xdist orders them.
LONG = (
    "serial",
    "tests/attacks/test_redteam_sandbox.py",
    "tests/attacks/test_safe_default.py",
    "tests/attacks/test_kernel_lifetime.py",
    "tests/tools/test_edit_safety.py::test_kill_at_random_moments_leaves_old_or_new",
    "tests/server/test_http.py",
    "tests/attacks/test_http_flood.py",
    "tests/server/test_cancel_modes.py",
    "tests/client/test_e2e_loop.py",
    "tests/attacks/test_http_auth_methods.py",
    "tests/client/test_xml_loop.py",
    "tests/client/test_oauth.py",
    "tests/server/test_auth_discovery.py",
    "tests/client/test_cli.py",
    "tests/attacks/test_sse_streams.py",
    "tests/attacks/test_walk_bounds.py",
    "tests/test_history_undo.py::test_history_and_undo_from_another_directory",
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


def _cache_rewritten_test_modules(config: pytest.Config) -> None:
    """Rewrite the asserts of every test module once, into pytest's own cache (checked against the source's
    hash), before the workers start: each worker would otherwise rewrite all of them (~4 s of CPU each)."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
    except (ImportError, AttributeError, KeyError):
        return
    patterns = [*config.getini("python_files"), "conftest.py"]
    for source in sorted((REPO / "tests").rglob("*.py")):
        if not any(fnmatch.fnmatch(source.name, pattern) for pattern in patterns):
            continue
        pyc = rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(source, pyc) is None and rewrite.try_makedirs(pyc.parent):
            source_hash, code = rewrite._rewrite_test(source, config)
            rewrite._write_pyc(state, code, source_hash, pyc)


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        _cache_rewritten_test_modules(config)


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
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    def rank(scope: str) -> int:
        return LONG.index(scope) if scope in LONG else len(LONG)

    class Scheduler(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return _xdist_scope(nodeid)

        def _assign_work_unit(self, node) -> None:  # noqa: ANN001
            if not self.ordered:
                self.ordered = True
                self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=lambda item: rank(item[0])))
            super()._assign_work_unit(node)

        def _reschedule(self, node) -> None:  # noqa: ANN001
            """Behind a long unit only one more unit is queued, the smallest: a worker starts its last
            test only once it has another one (or is told to stop)."""
            assigned = self.assigned_work.get(node, {})
            long_running = any(rank(scope) < len(LONG) and not all(unit.values()) for scope, unit in assigned.items())
            if not long_running or node.shutting_down or not self.workqueue:
                super()._reschedule(node)
            elif self._pending_of(assigned) <= 1:
                self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
                self._assign_work_unit(node)

    return Scheduler(config, log)
