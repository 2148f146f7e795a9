"""Drive a real Gemini CLI against the coretools server, with a local stand-in for the Gemini API.

    uv run --locked python benchmarks/gemini_cli_host.py
    uv run --locked python benchmarks/gemini_cli_host.py --server-command ~/.local/bin/coretools-mcp

On first use it installs ``@google/gemini-cli`` (the pinned version below) with npm into a cache
directory (``--cache``, default ``$XDG_CACHE_HOME/coretools/gemini-cli``). Then, in one
command, it:

1. makes a scratch root holding ``note.txt`` with a random marker, and a separate working
   directory for Gemini CLI (so Gemini CLI's own file tools cannot see the note);
2. writes ``settings.json`` in a temporary ``HOME`` with the README's Gemini CLI entry for
   coretools (an absolute command, ``--root``, ``timeout``), except ``trust: true``: headless
   Gemini CLI cannot ask for confirmation, so it offers the model an untrusted server's tools
   not at all (with ``trust: true`` it offers coretools' read-only tools);
3. serves the Gemini API's wire format on 127.0.0.1 and points Gemini CLI at it with
   ``GOOGLE_GEMINI_BASE_URL`` and a dummy ``GEMINI_API_KEY``. The stand-in model answers the
   conversation turn that declares coretools' ``read_file`` with a ``functionCall`` to it (the
   note's absolute path), and the turn carrying the ``functionResponse`` with a final text
   quoting what came back; Gemini CLI's side requests (JSON-mode helpers) get a minimal answer
   of the requested shape;
4. runs ``gemini -p ... -o json`` headless and checks that Gemini CLI published coretools'
   tools to the model, sent the call, got the marker back from our server (only coretools can
   read the note), returned it to the model as the matching ``functionResponse``, and printed
   the final text; and that its own statistics count one successful call of the tool.

Exit code 0 when every check holds; otherwise the failed checks, the stand-in's request log and
Gemini CLI's output are printed and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

GEMINI_CLI_PACKAGE = "@google/gemini-cli@0.61.0"
MODEL = "gemini-2.5-flash"
SERVER_ALIAS = "coretools"


def cache_dir(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "coretools" / "gemini-cli"


def ensure_gemini_cli(cache: Path) -> list[str]:
    """``[node, gemini's entry script]``, installed with npm on first use."""
    package = cache / "node_modules" / "@google" / "gemini-cli"
    wanted = GEMINI_CLI_PACKAGE.rsplit("@", 1)[1]
    manifest = package / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != wanted:
        npm = shutil.which("npm")
        if npm is None:
            sys.exit("npm is needed to install Gemini CLI; install Node.js (20 or newer) first")
        print(f"installing {GEMINI_CLI_PACKAGE} into {cache} ...", file=sys.stderr)
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", "--loglevel=error", GEMINI_CLI_PACKAGE], check=True)
    node = shutil.which("node")
    if node is None:
        sys.exit("node is not on PATH")
    bin_entry = json.loads(manifest.read_text())["bin"]
    script = bin_entry if isinstance(bin_entry, str) else bin_entry["gemini"]
    return [node, str(package / script)]


def default_server_command() -> str:
    script = Path(sys.executable).parent / "coretools-mcp"
    found = str(script) if script.exists() else shutil.which("coretools-mcp")
    if not found:
        sys.exit("coretools-mcp is not installed here: run with `uv run --locked python ...` or pass --server-command")
    return found


# ------------------------------------------------------------------------------------------ the model


def sample(schema: Any) -> Any:
    """A minimal value of a (Gemini-dialect) JSON schema, for Gemini CLI's JSON-mode side requests."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: sample(sub) for name, sub in properties.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "ok"


class StandInModel:
    """Answers Gemini API requests; keeps a log and the checks' evidence."""

    def __init__(self, note_path: str, marker: str) -> None:
        self.note_path = note_path
        self.marker = marker
        self.log: list[str] = []
        self.problems: list[str] = []
        self.declared: list[str] = []
        self.tool_name: str | None = None
        self.call_issued: dict[str, Any] | None = None
        self.response_seen: dict[str, Any] | None = None
        self.final_text: str | None = None
        self.lock = threading.Lock()

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if ":countTokens" in path:
            return {"totalTokens": 1}
        generation = body.get("generationConfig") or {}
        contents = body.get("contents") or []
        names = [d.get("name", "") for tool in body.get("tools") or [] for d in tool.get("functionDeclarations") or []]
        ours = next((n for n in names if n.endswith("read_file") and SERVER_ALIAS in n), None)
        with self.lock:
            self.log.append(f"POST {path}: {len(contents)} turns, {len(names)} tools{' (ours: ' + ours + ')' if ours else ''}")
            if "responseJsonSchema" in generation or "responseSchema" in generation:
                schema = generation.get("responseJsonSchema") or generation.get("responseSchema")
                return _text_response(json.dumps(sample(schema)))
            if not ours:
                return _text_response("This stand-in model only answers turns that offer coretools' read_file.")
            self.declared = [n for n in names if SERVER_ALIAS in n]
            self.tool_name = ours
            responses = [p["functionResponse"] for p in (contents[-1].get("parts") or []) if "functionResponse" in p] if contents else []
            if not responses:
                call = {"name": ours, "args": {"absolute_path": self.note_path}}
                self.call_issued = call
                return _response([{"functionCall": call}])
            response = responses[0]
            self.response_seen = response
            if response.get("name") != ours:
                self.problems.append(f"functionResponse is named {response.get('name')!r}, the call was {ours!r}")
            text = json.dumps(response.get("response"))
            if self.marker not in text:
                self.problems.append(f"the functionResponse does not hold the note's marker: {text[:400]}")
            self.final_text = f"The note says {self.marker}."
            return _text_response(self.final_text)


def _response(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": MODEL,
    }


def _text_response(text: str) -> dict[str, Any]:
    return _response([{"text": text}])


def serve(model: StandInModel) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            model.log.append(f"GET {self.path}: 404")
            self._send(404, "application/json", b"{}")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                payload = model.answer(self.path, json.loads(raw or b"{}"))
            except Exception as exc:  # a bug here should show in the report, not hang Gemini CLI
                model.problems.append(f"stand-in failed on {self.path}: {exc!r}")
                self._send(500, "application/json", json.dumps({"error": {"code": 500, "message": repr(exc)}}).encode())
                return
            if "alt=sse" in self.path:
                self._send(200, "text/event-stream", f"data: {json.dumps(payload)}\r\n\r\n".encode())
            else:
                self._send(200, "application/json", json.dumps(payload).encode())

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ------------------------------------------------------------------------------------------ the run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", help="where Gemini CLI is installed")
    parser.add_argument("--server-command", help="the coretools-mcp to register (default: this environment's)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds Gemini CLI may take (default 180)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary HOME, root and working directory")
    args = parser.parse_args()

    gemini = ensure_gemini_cli(cache_dir(args.cache))
    server_command = os.path.abspath(os.path.expanduser(args.server_command)) if args.server_command else default_server_command()
    scratch = Path(tempfile.mkdtemp(prefix="gemini-cli-host-"))
    home, root, workdir = scratch / "home", scratch / "root", scratch / "work"
    for directory in (home / ".gemini", root, workdir):
        directory.mkdir(parents=True)
    marker = f"coretools-marker-{secrets.token_hex(8)}"
    note = root / "note.txt"
    note.write_text(f"{marker}\n")
    entry = {"command": server_command, "args": ["--root", str(root)], "timeout": 600000, "trust": True}
    settings = {"mcpServers": {SERVER_ALIAS: entry}, "security": {"auth": {"selectedType": "gemini-api-key"}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2))

    model = StandInModel(str(note), marker)
    server = serve(model)
    host, port = server.server_address[:2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "VERTEX", "CLOUDSDK_"))}
    env.update(HOME=str(home), GEMINI_API_KEY="stand-in-key", GOOGLE_GEMINI_BASE_URL=f"http://{host}:{port}", NO_COLOR="1")
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env.pop(name, None)
    command = [*gemini, "-p", "What does note.txt in the coretools root say?", "-m", MODEL, "--skip-trust", "-o", "json"]
    print(f"gemini-cli {GEMINI_CLI_PACKAGE.rsplit('@', 1)[1]} -> stand-in model at {host}:{port} -> {server_command} --root {root}", file=sys.stderr)
    try:
        run = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=args.timeout, stdin=subprocess.DEVNULL)
        stdout, stderr, code = run.stdout, run.stderr, run.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        code = None
    finally:
        server.shutdown()

    checks: list[tuple[str, bool, str]] = []
    checks.append(("Gemini CLI exited 0", code == 0, f"exit code {code}" + (" (timed out)" if code is None else "")))
    checks.append(("coretools' tools were declared to the model", bool(model.tool_name), ", ".join(model.declared) or "none"))
    checks.append(("the model's call was answered with a functionResponse", model.response_seen is not None, str(model.call_issued)))
    checks.append(("the result came back from our server (the note's marker)", model.response_seen is not None and not model.problems, "; ".join(model.problems) or "marker present"))
    try:
        output = json.loads(stdout)
    except ValueError:
        output = {}
    answer = output.get("response") or ""
    checks.append(("Gemini CLI printed the model's final text", bool(model.final_text) and model.final_text in answer, answer[:200]))
    by_name = (((output.get("stats") or {}).get("tools") or {}).get("byName") or {}).get(model.tool_name or "", {})
    checks.append(("Gemini CLI counts one successful call of the tool", by_name.get("count") == 1 and by_name.get("success") == 1, json.dumps(by_name)[:200]))

    for name, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'}  {name}: {detail}")
    failed = [name for name, ok, _ in checks if not ok]
    if failed:
        print("\nstand-in model's log:\n  " + "\n  ".join(model.log))
        print(f"\nGemini CLI stdout:\n{stdout[-4000:]}\nGemini CLI stderr:\n{stderr[-4000:]}")
    if args.keep or failed:
        print(f"\nscratch directory kept: {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
