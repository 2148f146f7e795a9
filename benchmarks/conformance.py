"""Run the official MCP conformance suite against the coretools server and the client bridge.

    uv run --locked python benchmarks/conformance.py                 # server and client scenarios
    uv run --locked python benchmarks/conformance.py --only server   # or: --only client
    uv run --locked python benchmarks/conformance.py --only client --scenario auth/metadata-default

On first use it installs, with npm, Node 22 (the npm package ``node@22``) and
``@modelcontextprotocol/conformance@0.1.16`` into a cache directory (``--cache``, default
``$XDG_CACHE_HOME/coretools/conformance``); later runs reuse them. It needs ``npm`` on PATH and
the registry, nothing else.

Server scenarios: the suite only tests servers by URL, so the script starts
``coretools-mcp serve --transport http --port 0`` on a scratch root (once stateful, once
``--stateless``; ``--modes`` picks) and points ``conformance server --suite all`` at it.
Scenarios written for the suite's own test server (its ``test_*`` tools, ``test://``
resources and test prompts) or for a capability the server does not declare in ``initialize``
are reported as not applicable, with the reason; their raw outcome is shown beside it.

Client scenarios: ``conformance client --scenario X --command "<python> this-script
client-adapter"`` starts a test server per scenario and runs the command with that server's URL
appended. The adapter is the bridge used as a library, as a host uses it: it writes an
``mcp.json`` for the URL (an ``oauth`` block when the scenario hands out pre-registered client
credentials), opens ``coretools.client.bridge.Bridge`` on it, lists the tools and calls each one
once. Elicitation requests are accepted with an empty form (the bridge is expected to fill in
the schema's defaults) when ``Bridge`` takes an ``elicitation_callback``; an OAuth sign-in's
browser step is played by ``$BROWSER`` pointing at this script's ``open-url``, which follows the
authorization URL's redirects like a browser whose user approves. Each adapter run gets a fresh
``HOME`` and ``XDG_*`` directories, so tokens never carry over between scenarios.

A scenario passes when it has at least one successful check and no failure or warning. The
script prints one table per side and the failing checks with their messages; it exits 0 when
every applicable scenario passed, 1 otherwise. Raw results stay in ``--output`` (default: a
temporary directory, printed at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NODE_PACKAGE = "node@22"
SUITE_PACKAGE = "@modelcontextprotocol/conformance@0.1.16"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"

FIXTURE = "the suite's own fixture"
# Server scenarios that only the suite's reference server can pass: they call its tools, read its
# resources or get its prompts by name.
SERVER_FIXTURES: dict[str, str] = {
    "tools-call-simple-text": "tool test_simple_text",
    "tools-call-image": "tool test_image_content",
    "tools-call-audio": "tool test_audio_content",
    "tools-call-embedded-resource": "tool test_embedded_resource",
    "tools-call-mixed-content": "tool test_multiple_content_types",
    "tools-call-with-logging": "tool test_tool_with_logging",
    "tools-call-error": "tool test_error_handling",
    "tools-call-with-progress": "tool test_tool_with_progress",
    "tools-call-sampling": "tool test_sampling",
    "tools-call-elicitation": "tool test_elicitation",
    "elicitation-sep1034-defaults": "tool test_elicitation_sep1034_defaults",
    "elicitation-sep1330-enums": "tool test_elicitation_sep1330_enums",
    "json-schema-2020-12": "tool json_schema_2020_12_tool",
    "server-sse-polling": "tool test_reconnection",
    "resources-read-text": "resource test://static-text",
    "resources-read-binary": "resource test://static-binary",
    "resources-templates-read": "template test://template/{id}/data",
    "resources-subscribe": "resource test://watched-resource",
    "resources-unsubscribe": "resource test://watched-resource",
    "completion-complete": "prompt test_prompt_with_arguments",
    "prompts-get-simple": "prompt test_simple_prompt",
    "prompts-get-with-args": "prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": "prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": "prompt test_prompt_with_image",
}
# The capability (a key of the server's initialize result) a scenario exercises.
SERVER_CAPABILITY: dict[str, str] = {
    "logging-set-level": "logging",
    "completion-complete": "completions",
    "prompts-list": "prompts",
    "resources-list": "resources",
}
# Server scenarios that test sessions, which --stateless does without by design.
STATELESS_NOT_APPLICABLE: dict[str, str] = {
    "server-sse-multiple-streams": "its one check asks for a session id; --stateless has no sessions",
}
# Client scenarios outside what the bridge sets out to do (issue 22: OAuth 2.1 authorization code
# with a loopback redirect): machine-to-machine grants and cross-app access are extensions.
CLIENT_NOT_APPLICABLE: dict[str, str] = {
    "auth/client-credentials-jwt": "extension: client-credentials grant with a private-key JWT",
    "auth/client-credentials-basic": "extension: client-credentials grant (no user, no browser)",
    "auth/cross-app-access-complete-flow": "extension: cross-app access (an IdP token exchange)",
}
# Arguments for the tools the client scenarios' servers publish; others are called with {}.
CLIENT_TOOL_ARGUMENTS: dict[str, dict[str, Any]] = {"add_numbers": {"a": 5, "b": 3}}


# ------------------------------------------------------------------------------------------ setup


def cache_dir(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "coretools" / "conformance"


def npm_install(prefix: Path, package: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("npm is needed to install Node 22 and the conformance suite; install Node.js first")
    print(f"installing {package} into {prefix} ...", file=sys.stderr)
    prefix.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error", package], check=True)


def ensure_suite(cache: Path) -> tuple[Path, Path]:
    """The node 22 binary and the suite's entry script, installed on first use."""
    node = cache / "node22" / "node_modules" / "node" / "bin" / "node"
    if not node.exists():
        npm_install(cache / "node22", NODE_PACKAGE)
    suite = cache / "suite" / "node_modules" / "@modelcontextprotocol" / "conformance"
    wanted = SUITE_PACKAGE.rsplit("@", 1)[1]
    if not (suite / "package.json").exists() or json.loads((suite / "package.json").read_text())["version"] != wanted:
        npm_install(cache / "suite", SUITE_PACKAGE)
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if not version.startswith("v22."):
        sys.exit(f"{node} is {version}, expected Node 22")
    return node, suite / "dist" / "index.js"


def coretools_command() -> list[str]:
    """``coretools-mcp`` from the environment running this script (the checkout under test)."""
    script = Path(sys.executable).parent / "coretools-mcp"
    if script.exists():
        return [str(script)]
    found = shutil.which("coretools-mcp")
    if found is None:
        sys.exit("coretools-mcp is not installed here: run this script with `uv run --locked python ...`")
    return [found]


# ------------------------------------------------------------------------------------------ results


@dataclass
class Outcome:
    scenario: str
    versions: str = ""
    checks: list[dict[str, Any]] = field(default_factory=list)
    not_applicable: str | None = None
    error: str | None = None

    def count(self, status: str) -> int:
        return sum(1 for c in self.checks if c.get("status") == status)

    @property
    def raw(self) -> str:
        if self.error:
            return "error"
        if self.count("FAILURE"):
            return "fail"
        if self.count("WARNING"):
            return "warn"
        return "pass" if self.count("SUCCESS") else "no checks"

    @property
    def verdict(self) -> str:
        return "n/a" if self.not_applicable else self.raw

    def problems(self) -> list[str]:
        lines = [f"{c.get('id')}: {c['status'].lower()}: {c.get('errorMessage') or c.get('description') or ''}" for c in self.checks if c.get("status") in ("FAILURE", "WARNING")]
        if self.error:
            lines.append(self.error)
        return lines


def read_checks(directory: Path) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for path in sorted(directory.rglob("checks.json")):
        checks.extend(json.loads(path.read_text()))
    return checks


def list_scenarios(node: Path, suite: Path) -> dict[str, dict[str, str]]:
    """``{"server": {name: versions}, "client": {...}}`` from ``conformance list``."""
    text = subprocess.run([str(node), str(suite), "list"], capture_output=True, text=True, check=True).stdout
    found: dict[str, dict[str, str]] = {"server": {}, "client": {}}
    side = None
    for line in text.splitlines():
        if line.startswith("Server scenarios"):
            side = "server"
        elif line.startswith("Client scenarios"):
            side = "client"
        elif side and (match := re.match(r"\s+- (\S+)(?: \[(.*)\])?", line)):
            found[side][match.group(1)] = match.group(2) or ""
    return found


def print_table(title: str, outcomes: list[Outcome], columns: list[str] | None = None) -> None:
    print(f"\n{title}")
    width = max(len(o.scenario) for o in outcomes)
    print(f"  {'scenario'.ljust(width)}  {'result':9}  ok  fail warn  note")
    for o in outcomes:
        note = ""
        if o.not_applicable:
            note = f"{o.not_applicable} (raw: {o.raw})"
        elif o.verdict != "pass" and o.problems():
            note = o.problems()[0][:150]
        print(f"  {o.scenario.ljust(width)}  {o.verdict:9}  {o.count('SUCCESS'):>2}  {o.count('FAILURE'):>4} {o.count('WARNING'):>4}  {note}")


def summarise(label: str, outcomes: list[Outcome]) -> str:
    applicable = [o for o in outcomes if not o.not_applicable]
    passed = [o for o in applicable if o.verdict == "pass"]
    failed = [o.scenario for o in applicable if o.verdict != "pass"]
    na = [o.scenario for o in outcomes if o.not_applicable]
    return (
        f"{label}: {len(passed)}/{len(applicable)} applicable scenarios pass"
        + (f"; not passing: {', '.join(failed)}" if failed else "")
        + f"; {len(na)} not applicable"
    )


# ------------------------------------------------------------------------------------------ server side


def start_server(root: Path, stateless: bool) -> tuple[subprocess.Popen[str], str]:
    command = [*coretools_command(), "serve", "--transport", "http", "--port", "0", "--root", str(root)]
    if stateless:
        command.append("--stateless")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        if match := re.search(r"at (http://\S+/mcp)", line):
            # keep reading the log so that a chatty server never blocks on a full pipe
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, match.group(1)
    process.kill()
    sys.exit(f"the server did not start: {' '.join(command)}")


def server_capabilities(url: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "conformance-runner", "version": "1"}},
    }
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json", "accept": "application/json, text/event-stream"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    payload = next((json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()), None)
    payload = payload or json.loads(text)
    return payload["result"]["capabilities"]


def run_server_side(node: Path, suite: Path, versions: dict[str, str], out: Path, modes: list[str], only: str | None) -> list[tuple[str, list[Outcome]]]:
    tables = []
    for mode in modes:
        root = Path(tempfile.mkdtemp(prefix="conformance-root-"))
        (root / "README.md").write_text("a scratch root for the conformance suite\n")
        process, url = start_server(root, stateless=mode == "stateless")
        try:
            capabilities = server_capabilities(url)
            target = out / f"server-{mode}"
            command = [str(node), str(suite), "server", "--url", url, "-o", str(target)]
            command += ["--scenario", only] if only else ["--suite", "all"]
            subprocess.run(command, capture_output=True, text=True, timeout=600)
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
            shutil.rmtree(root, ignore_errors=True)
        outcomes = []
        for name, spec in versions.items():
            if only and name != only:
                continue
            outcome = Outcome(name, spec)
            runs = sorted(target.glob(f"server-{name}-20*")) if target.exists() else []
            if runs:
                outcome.checks = read_checks(runs[-1])
            else:
                outcome.error = "the suite produced no result for this scenario"
            capability = SERVER_CAPABILITY.get(name)
            if name in SERVER_FIXTURES:
                outcome.not_applicable = f"needs {FIXTURE}: {SERVER_FIXTURES[name]}"
            elif mode == "stateless" and name in STATELESS_NOT_APPLICABLE:
                outcome.not_applicable = STATELESS_NOT_APPLICABLE[name]
            elif capability and capability not in capabilities:
                outcome.not_applicable = f"capability '{capability}' not declared"
            outcomes.append(outcome)
        tables.append((f"server, {mode} HTTP ({url})", outcomes))
    return tables


# ------------------------------------------------------------------------------------------ client side


def run_client_scenario(node: Path, suite: Path, name: str, versions: str, out: Path, timeout_ms: int) -> Outcome:
    outcome = Outcome(name, versions)
    target = out / "client" / name.replace("/", "_")
    adapter = f"{sys.executable} {Path(__file__).resolve()} client-adapter"
    command = [str(node), str(suite), "client", "--scenario", name, "--command", adapter, "--timeout", str(timeout_ms), "-o", str(target)]
    try:
        subprocess.run(command, capture_output=True, text=True, timeout=timeout_ms / 1000 + 60)
    except subprocess.TimeoutExpired:
        outcome.error = "the suite did not finish"
    outcome.checks = read_checks(target) if target.exists() else []
    if not outcome.checks and not outcome.error:
        outcome.error = "the suite produced no result for this scenario"
    if name in CLIENT_NOT_APPLICABLE:
        outcome.not_applicable = CLIENT_NOT_APPLICABLE[name]
    return outcome


def run_client_side(node: Path, suite: Path, versions: dict[str, str], out: Path, only: str | None, jobs: int, timeout_ms: int) -> list[Outcome]:
    names = [n for n in versions if not only or n == only]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda n: run_client_scenario(node, suite, n, versions[n], out, timeout_ms), names))


async def client_adapter(url: str) -> int:
    """Act as the client under test for one scenario: the bridge on an mcp.json naming ``url``."""
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    home = Path(tempfile.mkdtemp(prefix="conformance-client-"))
    for name, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"), ("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share"), ("XDG_CACHE_HOME", ".cache")):
        os.environ[name] = str(home / sub)
    os.environ["BROWSER"] = f"{sys.executable} {Path(__file__).resolve()} open-url %s"
    # The suite's stand-in for the Client ID Metadata Document a user would publish for their client: used
    # only where the authorization server says it accepts such documents.
    entry: dict[str, Any] = {"httpUrl": url, "oauth": {"clientMetadataUrl": CLIENT_METADATA_URL}}
    if context.get("client_id"):
        entry["oauth"] = {"enabled": True, "clientId": context["client_id"]}
        if context.get("client_secret"):
            entry["oauth"]["clientSecret"] = context["client_secret"]
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"conformance": entry}}))

    from mcp import types

    from coretools.client.bridge import Bridge

    async def accept_with_defaults(*args: Any, **kwargs: Any) -> types.ElicitResult:
        print(f"elicitation: accepting with an empty form ({scenario})")
        return types.ElicitResult(action="accept", content={})

    options: dict[str, Any] = {}
    if "elicitation_callback" in inspect.signature(Bridge.__init__).parameters:
        options["elicitation_callback"] = accept_with_defaults
    else:
        print("note: Bridge takes no elicitation_callback yet")
    if "sign_in" in inspect.signature(Bridge.__init__).parameters:
        from coretools.client.oauth import BrowserSignIn

        options["sign_in"] = BrowserSignIn()  # the browser step is $BROWSER, set above
    code = 0
    async with Bridge.from_config(config, **options) as bridge:
        for failure in bridge.failures:
            print(f"server failed: {failure}")
            code = 1
        print(f"tools: {[tool.name for tool in bridge.tools]}")
        for tool in bridge.tools:
            outcome = await bridge.call(tool.name, CLIENT_TOOL_ARGUMENTS.get(tool.name, {}))
            print(f"call {tool.name}: {'ok' if outcome.ok else 'error'}: {outcome.as_text()[:300]}")
    shutil.rmtree(home, ignore_errors=True)
    return code


def open_url(url: str) -> int:
    """The browser of the OAuth step: follow the authorization URL to the loopback redirect."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            response.read()
    except Exception as exc:  # the suite records what the client did; this only reports
        print(f"open-url: {exc}", file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------------------------------ main


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "client-adapter":
        return asyncio.run(client_adapter(sys.argv[-1]))
    if len(sys.argv) == 3 and sys.argv[1] == "open-url":
        return open_url(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("server", "client"), help="run one side only")
    parser.add_argument("--scenario", help="run one scenario (with --only)")
    parser.add_argument("--modes", default="stateful,stateless", help="server modes, comma-separated (default both)")
    parser.add_argument("--cache", help="where Node 22 and the suite are installed")
    parser.add_argument("--output", help="keep the raw results here (default: a temporary directory)")
    parser.add_argument("--jobs", type=int, default=3, help="client scenarios run at once (default 3)")
    parser.add_argument("--timeout", type=int, default=30000, help="per client scenario, in ms (default 30000)")
    args = parser.parse_args()
    if args.scenario and not args.only:
        parser.error("--scenario needs --only server or --only client")

    node, suite = ensure_suite(cache_dir(args.cache))
    out = Path(args.output).resolve() if args.output else Path(tempfile.mkdtemp(prefix="conformance-results-"))
    out.mkdir(parents=True, exist_ok=True)
    scenarios = list_scenarios(node, suite)
    started = time.monotonic()
    summaries = []
    everything: list[Outcome] = []
    if args.only != "client":
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        for title, outcomes in run_server_side(node, suite, scenarios["server"], out, modes, args.scenario):
            print_table(title, outcomes)
            summaries.append(summarise(title, outcomes))
            everything += outcomes
    if args.only != "server":
        outcomes = run_client_side(node, suite, scenarios["client"], out, args.scenario, args.jobs, args.timeout)
        print_table("client: the bridge (coretools.client.bridge.Bridge)", outcomes)
        summaries.append(summarise("client", outcomes))
        groups = {"current spec": ("2025-06-18", "2025-11-25"), "2025-03-26 back-compat": ("2025-03-26",), "draft": ("draft",)}
        for group, tags in groups.items():
            auth = [o for o in outcomes if o.scenario.startswith("auth/") and not o.not_applicable and any(t in o.versions for t in tags)]
            if auth:
                passed = sum(o.verdict == "pass" for o in auth)
                summaries.append(f"client auth, {group}: {passed}/{len(auth)} pass (warnings count as not passed)")
        everything += outcomes
    failing = [o for o in everything if not o.not_applicable and o.verdict != "pass"]
    if failing:
        print("\nchecks that did not pass:")
        for o in failing:
            for line in o.problems() or [f"{o.raw}"]:
                print(f"  {o.scenario}: {line[:400]}")
    print()
    for line in summaries:
        print(line)
    print(f"({time.monotonic() - started:.0f} s; raw results in {out})")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
