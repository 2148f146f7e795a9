"""The layers, enforced on the source: every `import` of a coretools module, at any depth in a file,
is checked against what its layer may import.

    errors.py    imports nothing from the package
    sandbox/     imports sandbox and errors
    workspace/   imports workspace, sandbox and errors
    tools/       imports tools, workspace, sandbox and errors; a tool module never imports another tool module
    server/      imports server, tools, workspace, sandbox and errors
    client/      imports client only
    cli.py       the top: nothing imports it (but `__main__`)

and no module is over 1,000 lines. At run time, importing the bridge loads no module of the other
layers and not google-genai.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "coretools"
MAX_LINES = 1_000
ALLOWED = {
    "errors": set(),
    "sandbox": {"sandbox", "errors"},
    "workspace": {"workspace", "sandbox", "errors"},
    "tools": {"tools", "workspace", "sandbox", "errors"},
    "server": {"server", "tools", "workspace", "sandbox", "errors"},
    "client": {"client"},
    "cli": {"server", "tools", "workspace", "sandbox", "errors", "client"},
    "__main__": {"cli"},
}
# `from coretools import __version__` names the package itself, which every layer may read.
TOP = "coretools"


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else TOP


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(source: str, module: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """Every coretools module `source` imports (absolute or relative), with its line."""
    found = []
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == TOP]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.split(".")[0] != TOP:
                continue
            for alias in node.names:  # `from coretools.tools import glob` imports the module tools.glob
                sub = PACKAGE.parent.joinpath(*name.split("."), alias.name)
                is_module = sub.with_suffix(".py").exists() or (sub / "__init__.py").exists()
                found.append((node.lineno, f"{name}.{alias.name}" if is_module else name))
    return found


def tool_modules() -> set[str]:
    """Modules that define a published tool (`TOOL = ...` or `provide(...)`)."""
    names = set()
    for path in (PACKAGE / "tools").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "TOOL" for t in node.targets):
                names.add(module_name(path))
            if isinstance(node, ast.FunctionDef) and node.name == "provide":
                names.add(module_name(path))
    return names


def violations(path: Path, source: str, tools: set[str]) -> list[str]:
    module = module_name(path)
    layer = layer_of(module)
    allowed = ALLOWED.get(layer, set()) | {layer}
    problems = []
    for line, target in imported(source, module, is_package=path.name == "__init__.py"):
        where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        other = layer_of(target)
        if target == f"{TOP}.cli" and module != f"{TOP}.__main__":
            problems.append(f"{where}: nothing imports the CLI")
        elif other == TOP:
            continue
        elif layer == "errors" or other not in allowed:
            problems.append(f"{where}: {layer} may not import {other}")
        elif module in tools and target in tools and target != module:
            problems.append(f"{where}: a tool module may not import another tool module")
    return problems


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_import_respects_the_layers() -> None:
    tools = tool_modules()
    problems = [p for path in sources() for p in violations(path, path.read_text(), tools)]
    assert problems == []


def test_every_layer_exists() -> None:
    for name in ("sandbox", "workspace", "tools", "server", "client"):
        assert (PACKAGE / name / "__init__.py").is_file(), name
    assert (PACKAGE / "errors.py").is_file() and (PACKAGE / "cli.py").is_file()


def test_no_module_is_over_1000_lines() -> None:
    long = {str(p.relative_to(PACKAGE.parent)): n for p in sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


@pytest.mark.parametrize(
    ("file", "source", "expected"),
    [
        ("sandbox/x.py", "from coretools.tools.base import Tool\n", "sandbox may not import tools"),
        ("sandbox/x.py", "def f():\n    from coretools.server import app\n", "sandbox may not import server"),
        ("tools/x.py", "from ..server import app\n", "tools may not import server"),
        ("tools/x.py", "import coretools.client\n", "tools may not import client"),
        ("errors.py", "from coretools.sandbox import paths\n", "errors may not import sandbox"),
        ("sandbox/x.py", "from coretools.workspace import journal\n", "sandbox may not import workspace"),
        ("workspace/x.py", "from coretools.tools import base\n", "workspace may not import tools"),
        ("client/x.py", "from coretools.errors import ToolError\n", "client may not import errors"),
        ("server/x.py", "from coretools import cli\n", "nothing imports the CLI"),
        ("tools/read_file.py", "from coretools.tools import glob\n", "another tool module"),
    ],
)
def test_the_checker_sees_forbidden_imports(file: str, source: str, expected: str) -> None:
    """Guard against a check that cannot fail: each forbidden shape is reported."""
    tools = {"coretools.tools.read_file", "coretools.tools.glob"}
    problems = violations(PACKAGE / file, source, tools)
    assert any(expected in p for p in problems), problems


def test_the_checker_allows_what_the_rules_allow() -> None:
    tools = {"coretools.tools.read_file"}
    ok = "from coretools.sandbox.paths import Location\nfrom coretools.errors import ToolError\nfrom coretools import __version__\n"
    assert violations(PACKAGE / "tools/read_file.py", ok, tools) == []
    assert violations(PACKAGE / "server/app.py", "from coretools.tools.base import Tool\n", tools) == []


PROBE = """
import json, sys
import coretools.client
import coretools.client.cli
import coretools.client.loop
loaded = sorted(m for m in sys.modules if m.startswith(("coretools.server", "coretools.tools", "coretools.sandbox", "coretools.workspace", "coretools.errors", "google.genai")))
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


CLI_PROBE = """
import contextlib, io, json, os, sys
from coretools.cli import build_parser, main

root = sys.argv[1]
with open(os.path.join(root, "a.txt"), "w") as f:
    f.write("hello")
out, err = io.StringIO(), io.StringIO()
codes = []
types = []
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    build_parser(with_client=False)
    for argv in (["--version"], ["history", "--help"], ["undo", "--help"], ["call", "--help"], None,
                 ["call", "--root", root, "read_file", json.dumps({"absolute_path": os.path.join(root, "a.txt")})],
                 ["call", "--root", root, "write_file", json.dumps({"file_path": os.path.join(root, "b.txt"), "content": "x"})],
                 ["history", "--root", root], ["undo", "--root", root]):
        if argv is None:  # the parser (every tool module) needs not even the MCP types
            types = sorted(m for m in sys.modules if m.split(".")[0] == "mcp_types")
            continue
        try:
            codes.append(main(argv))
        except SystemExit as exc:
            codes.append(exc.code)
extra = EXTRA
print(json.dumps({"codes": codes, "out": out.getvalue(), "types": types, "sdk": sorted(m for m in sys.modules if m.split(".")[0] == "mcp")}))
"""


def _cli_probe(tmp_path: Path, extra: str = "None") -> dict:
    env = {**os.environ, "CORETOOLS_STATE_DIR": str(tmp_path / "state")}
    root = tmp_path / "root"
    root.mkdir()
    probe = CLI_PROBE.replace("EXTRA", extra)
    done = subprocess.run([sys.executable, "-c", probe, str(root)], capture_output=True, text=True, timeout=60,
                          env=env, cwd=root)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_cli_commands_that_do_not_serve_never_import_the_sdk(tmp_path: Path) -> None:
    """`--version`, `history`, `undo` and `call` (one tool, in-process) use the MCP types (`mcp_types`), never
    the `mcp` package: its `__init__` imports the SDK's client and server, most of a process's start-up CPU.
    Building the parser (and so importing every tool module) does without even the types."""
    seen = _cli_probe(tmp_path)
    assert seen["codes"] == [0, 0, 0, 0, 0, 0, 0, 0], seen
    assert "hello" in seen["out"] and "Undid edit 1" in seen["out"]  # the commands really ran
    assert seen["sdk"] == [] and seen["types"] == []


def test_the_cli_probe_would_see_the_sdk(tmp_path: Path) -> None:
    """Guard against a probe that cannot fail: importing the SDK is noticed."""
    assert "mcp.client" in _cli_probe(tmp_path, "__import__('mcp')")["sdk"]
