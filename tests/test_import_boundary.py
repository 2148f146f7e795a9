"""The layers, enforced on the source: every `import` of a coretools module, at any depth in a file,
is checked against what its layer may import.

    errors.py    imports nothing from the package
    sandbox/     imports sandbox and errors
    workspace/   imports workspace, sandbox and errors
    tools/       imports tools, workspace, sandbox and errors; a tool module never imports another tool module
    server/      imports server, tools, workspace, sandbox and errors
    client/      imports client only
    doctor.py    imports server, tools, workspace, sandbox and errors; only the CLI imports it
    cli.py       the top: nothing imports it (but `__main__`)

and no module is over 1,000 lines. The shape besides:

- no import cycle between coretools modules; an import inside a function or under `if TYPE_CHECKING:`
  counts like any other, so it cannot hide one;
- no module takes another's private names (`from a import _x`, `a._x`);
- the server, the CLI and doctor name no tool (no string literal is a published tool name): what they
  need of a tool, the tool contract says;
- search_file_content's modules live in its package (`tools/search/`), not as `search_*` modules;
- the tools enter the sandbox and the workspace layer by their front doors (`from coretools.sandbox
  import Workspace`: a name in the package's `__all__`), never module by module.

Each check has a case that shows it can fail. At run time, importing the bridge loads no module of the
other layers and not google-genai.
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
    "doctor": {"server", "tools", "workspace", "sandbox", "errors"},
    "cli": {"server", "tools", "workspace", "sandbox", "errors", "client", "doctor"},
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
    ok = "from coretools.sandbox import Location\nfrom coretools.errors import ToolError\nfrom coretools import __version__\n"
    assert violations(PACKAGE / "tools/read_file.py", ok, tools) == []
    assert violations(PACKAGE / "server/app.py", "from coretools.tools.base import Tool\n", tools) == []


# -- the shape: no cycle, no private name across modules, no tool named by the server, one search package,
# -- the sandbox's front door ------------------------------------------------------------------------------


def bound_modules(tree: ast.Module, module: str, *, is_package: bool = False) -> dict[str, str]:
    """The names a file binds to coretools modules (`from coretools.sandbox import durable`,
    `import coretools.sandbox.kernel as kernel`), each with the module it names."""
    bound = {}
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update({a.asname: a.name for a in node.names if a.asname and a.name.split(".")[0] == TOP})
        elif isinstance(node, ast.ImportFrom):
            base = _from_module(node, package)
            for alias in node.names:
                if base.split(".")[0] == TOP and _is_module(f"{base}.{alias.name}"):
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def _from_module(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def import_graph(files: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the coretools modules it imports, at any depth: an import inside a function or under
    `if TYPE_CHECKING:` is a dependency all the same, so neither may hide a cycle. A package's own
    `__init__`, which Python runs before any of its modules, is not counted as imported by them."""
    return {
        module: {t for _, t in imported(source, module, is_package=is_package) if t not in (module, TOP)}
        for module, (source, is_package) in files.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: each strongly connected component of more than one module, sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative: the graph has hundreds of modules
        work = [(start, iter(sorted(graph.get(start, ()))))]
        order[start] = low[start] = len(order)
        stack.append(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in graph:
                    continue
                if target not in order:
                    order[target] = low[target] = len(order)
                    stack.append(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in stack:
                    low[node] = min(low[node], order[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(found)


def _all_files() -> dict[str, tuple[str, bool]]:
    return {module_name(p): (p.read_text(), p.name == "__init__.py") for p in sources()}


def test_no_import_cycle() -> None:
    assert cycles(import_graph(_all_files())) == []


def test_the_checker_sees_a_cycle() -> None:
    files = {
        "coretools.sandbox.gateway": ("from coretools.sandbox import kernel\n", False),
        "coretools.sandbox.kernel": ("def f():\n    from coretools.sandbox.gateway import Workspace\n", False),
        "coretools.sandbox.paths": ("from coretools.sandbox import kernel\n", False),
    }
    assert cycles(import_graph(files)) == [["coretools.sandbox.gateway", "coretools.sandbox.kernel"]]
    files["coretools.sandbox.kernel"] = ("import os\n", False)
    assert cycles(import_graph(files)) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(path: Path, source: str) -> list[str]:
    """Each private name (`_x`) a file takes from another coretools module: `from a import _x`, or `a._x`
    where `a` is a name bound to a coretools module."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rsplit(".", 1)[0]
    tree = ast.parse(source)
    bound = bound_modules(tree, module, is_package=is_package)
    where = path.relative_to(PACKAGE.parent)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _from_module(node, package)
            if base.split(".")[0] == TOP and base != module:
                problems += [f"{where}:{node.lineno} imports {base}.{a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
            if bound.get(node.value.id, module) != module:
                problems.append(f"{where}:{node.lineno} reads {bound[node.value.id]}.{node.attr}")
    return problems


def test_no_private_name_crosses_modules() -> None:
    assert [p for path in sources() for p in private_uses(path, path.read_text())] == []


@pytest.mark.parametrize(
    "source",
    [
        "from coretools.sandbox.paths import _CONTROL_CHARS\n",
        "from .locks import _EDIT_LOCKS\n",
        "from coretools.sandbox import durable\n\ndurable._fsync_path('/')\n",
        "import coretools.sandbox.durable as d\n\ndef f():\n    return d._fsync_path\n",
    ],
)
def test_the_checker_sees_a_private_name(source: str) -> None:
    assert private_uses(PACKAGE / "sandbox/gateway.py", source) != []


def test_the_checker_allows_public_and_own_names() -> None:
    ok = "from coretools.sandbox import durable\nfrom coretools.sandbox.paths import within\n\ndurable.state_dir()\nx._y\n"
    assert private_uses(PACKAGE / "sandbox/gateway.py", ok) == []


def tool_names() -> set[str]:
    """The names the registry publishes (each tool's, and its newest dialect's)."""
    from coretools.tools import tool_modules as registry

    names = set()
    for module in registry():
        cls = getattr(module, "TOOL", None)
        if cls is not None:
            names |= {cls.name} | ({cls.latest_name} if cls.latest_name else set())
    return names


def named_tools(path: Path, source: str, names: set[str]) -> list[str]:
    """Each string literal in `source` that is a tool's name. Not one: a codec's error handler (`"replace"`
    given to `encode`/`decode`), and in the CLI its own subcommands (`SUBCOMMANDS`: `coretools-mcp undo`)."""
    tree = ast.parse(source)
    spared: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("encode", "decode"):
            spared |= {id(a) for a in node.args[1:2]} | {id(k.value) for k in node.keywords if k.arg == "errors"}
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SUBCOMMANDS" for t in node.targets):
            subcommands = {e.value for e in getattr(node.value, "elts", ()) if isinstance(e, ast.Constant)}
            spared |= {id(n) for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in subcommands}
    where = path.relative_to(PACKAGE.parent)
    return [
        f"{where}:{n.lineno} names the tool {n.value!r}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names and id(n) not in spared
    ]


def test_the_server_and_the_cli_name_no_tool() -> None:
    names = tool_names()
    assert {"read_file", "save_memory", "run_shell_command"} <= names
    files = [p for p in sources() if layer_of(module_name(p)) == "server"] + [PACKAGE / "cli.py", PACKAGE / "doctor.py"]
    assert [p for path in files for p in named_tools(path, path.read_text(), names)] == []


def test_the_checker_sees_a_named_tool() -> None:
    names = {"save_memory", "replace", "undo"}
    named = 'NARROWING = {"save_memory": "x"}\ntext.decode("utf-8", "replace")\ntools.get("replace")\n'
    assert named_tools(PACKAGE / "server/app.py", named, names) == [
        "coretools/server/app.py:1 names the tool 'save_memory'",
        "coretools/server/app.py:3 names the tool 'replace'",
    ]
    cli = 'SUBCOMMANDS = ("serve", "undo")\nsub.add_parser("undo")\n'
    assert named_tools(PACKAGE / "cli.py", cli, names) == []


def stray_search_modules(paths: list[Path]) -> list[str]:
    search = PACKAGE / "tools" / "search"
    return [str(p.relative_to(PACKAGE.parent)) for p in paths if p.stem.startswith("search_") and search not in p.parents]


def test_search_lives_in_its_package() -> None:
    assert stray_search_modules(sources()) == []


def test_the_checker_sees_a_stray_search_module() -> None:
    assert stray_search_modules([PACKAGE / "tools/search_engines.py", PACKAGE / "tools/search/engines.py"]) == [
        "coretools/tools/search_engines.py"
    ]


FRONT_DOORS = ("sandbox", "workspace")


def exported(layer: str) -> set[str]:
    """The names `coretools.<layer>` exports (its `__all__`)."""
    tree = ast.parse((PACKAGE / layer / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return {e.value for e in node.value.elts}
    return set()


def side_doors(path: Path, source: str, doors: dict[str, set[str]]) -> list[str]:
    """Each import by a tool module of the sandbox or the workspace layer other than a name its front door
    exports (`from coretools.sandbox import Workspace`): not a module of it, not a name it does not export."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rsplit(".", 1)[0]
    where = path.relative_to(PACKAGE.parent)
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[:2] in ([TOP, d] for d in doors)]
            problems += [f"{where}:{node.lineno} imports {n}" for n in names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_module(node, package)
            parts = base.split(".")
            if parts[0] != TOP or len(parts) < 2 or parts[1] not in doors:
                continue
            if len(parts) > 2:
                problems.append(f"{where}:{node.lineno} imports from {base}")
            else:
                problems += [f"{where}:{node.lineno} imports {base}.{a.name}, not exported" for a in node.names
                             if a.name not in doors[parts[1]]]
    return problems


def test_tools_enter_the_sandbox_and_the_workspace_by_their_front_doors() -> None:
    doors = {layer: exported(layer) for layer in FRONT_DOORS}
    assert all(doors.values()), doors
    tools = [p for p in sources() if layer_of(module_name(p)) == "tools"]
    assert [p for path in tools for p in side_doors(path, path.read_text(), doors)] == []


def test_each_front_door_names_what_it_exports() -> None:
    """Every exported name is there, and none hides a module of its package (`from coretools.sandbox import
    walker` must stay the module, whatever the door exports)."""
    import importlib

    for layer in FRONT_DOORS:
        door = importlib.import_module(f"{TOP}.{layer}")
        modules = {p.stem for p in (PACKAGE / layer).iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
        for name in exported(layer):
            value = getattr(door, name, None) or importlib.import_module(f"{TOP}.{layer}.{name}")
            assert name not in modules or getattr(value, "__name__", None) == f"{TOP}.{layer}.{name}", name


@pytest.mark.parametrize(
    "source",
    [
        "from coretools.sandbox.gateway import Workspace\n",
        "from coretools.sandbox import ripgrep\n",
        "import coretools.sandbox.walker\n",
        "def f():\n    from coretools.workspace.journal import Journal\n",
        "from ...sandbox.paths import Location\n",
    ],
)
def test_the_checker_sees_a_side_door(source: str) -> None:
    doors = {"sandbox": {"Workspace", "Location"}, "workspace": {"Journal"}}
    assert side_doors(PACKAGE / "tools/search/engines.py", source, doors) != []
    ok = "from coretools.sandbox import Location, Workspace\nfrom coretools.workspace import Journal\n"
    assert side_doors(PACKAGE / "tools/search/engines.py", ok, doors) == []


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


def imported_tools(path: Path, source: str) -> list[str]:
    """Each import in `source` of a tool's own module (a module `TOOL_MODULES` names, or one inside a tool's
    package): what the server and the CLI need of a tool comes through the registry and the contract."""
    from coretools.tools import TOOL_MODULES

    owned = tuple(f"{TOP}.tools.{name}" for name in TOOL_MODULES) + (f"{TOP}.tools.textedit",)
    module = module_name(path)
    where = path.relative_to(PACKAGE.parent)
    return [
        f"{where}:{line} imports the tool module {target}"
        for line, target in imported(source, module)
        if any(target == o or target.startswith(o + ".") for o in owned)
    ]


def test_the_server_and_the_cli_import_no_tool_module() -> None:
    files = [p for p in sources() if layer_of(module_name(p)) == "server"] + [PACKAGE / "cli.py", PACKAGE / "doctor.py"]
    assert [p for path in files for p in imported_tools(path, path.read_text())] == []


def test_the_checker_sees_an_imported_tool_module() -> None:
    source = "def f():\n    from coretools.tools.undo import describe\n    from coretools.tools.textedit.edit_tool import EditOptions\n"
    assert len(imported_tools(PACKAGE / "cli.py", source)) == 2
    assert imported_tools(PACKAGE / "cli.py", "from coretools.tools.base import Tool\nfrom coretools.tools import tool_modules\n") == []
