"""Attacks on the lifetime of what a command starts: no process outlives its call or the server, whatever it
does to its environment, session, process group or parent.

Each scene is a real stdio server (`python -m coretools serve`) in one sandbox mode (`none`, `landlock`,
`bwrap`), driven over its pipes with plain JSON-RPC, so the test holds the server's PID and chooses how it
ends: the client closes stdin (the usual end of a stdio server), SIGTERM, or SIGKILL (no handler runs: only
the kernel can take the commands with it — a PID namespace, PR_SET_PDEATHSIG, a cgroup). In one scene the
model starts every escape below in a foreground call, the same escapes inside a call stopped by its time
limit, and a few `is_background` commands; then the server ends. Every process carries a unique marker
argument (`sleep 4242.<digits>`), looked up in the host's `/proc/*/cmdline`, so what is found alive is
exactly what the command started, however it renamed its session or dropped the `CORETOOLS_RUN_ID`
environment marker.

What is asserted, per scene:
* a call stopped by its time limit (`--shell-timeout`) leaves nothing alive when it returns;
* `is_background` commands, escapes included, run while the server runs;
* within a few seconds after the server ends, however it ends, nothing that any command started is alive.
A foreground `cmd &` child may outlive its call (as in Gemini CLI); the server owns it until it exits.

Anything found alive is killed by PID when its scene ends.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from http_harness import wait_for
from raw_stdio import StdioServer, holders_of, marker

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(sys.platform != "linux", reason="the kernel's process tree is Linux's /proc"),
]

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
TIME_LIMIT = 2  # --shell-timeout of every scene: the stopped call waits this long
GONE_WITHIN = 5.0  # seconds after the server's end by which nothing may be left

# What a steered model runs to keep a process alive after its call: each `{m}` is one marker duration.
ESCAPES = {
    "setsid_env_u": "setsid env -u CORETOOLS_RUN_ID sleep {m} >/dev/null 2>&1 &",
    "double_fork": "( (sleep {m} >/dev/null 2>&1 &) &)",
    "nohup_disown": "nohup sleep {m} >/dev/null 2>&1 & disown",
    "setsid_fork": "setsid -f sleep {m} >/dev/null 2>&1",
    "new_process_group": PY + " -c 'import os; os.setpgid(0, 0); os.execvp(\"sleep\", [\"sleep\", \"{m}\"])' "
    ">/dev/null 2>&1 &",
    "wiped_env_double_fork": "env -i setsid -f sh -c '(sleep {m} &)' >/dev/null 2>&1",
    "respawns_ignoring_term": "setsid -f env -i sh -c 'trap \"\" TERM HUP INT; while :; do sleep {m}; done' "
    ">/dev/null 2>&1",
    "clears_pdeathsig": PY + " -c 'import ctypes, os; ctypes.CDLL(None).prctl(1, 0, 0, 0, 0); os.setsid(); "
    "os.execvp(\"sleep\", [\"sleep\", \"{m}\"])' >/dev/null 2>&1 &",
}
# `is_background` commands: the leader stays, and what it started tried to leave its group and marker.
BACKGROUND = {
    "plain": "exec sleep {m}",
    "setsid_env_u": "setsid -f env -u CORETOOLS_RUN_ID sleep {m} >/dev/null 2>&1; exec sleep {m}",
    "double_fork_new_group": "( (" + ESCAPES["new_process_group"] + ") &); exec sleep {m}",
}
MODES = {"none": ("--shell-sandbox", "none"), "landlock": ("--shell-sandbox", "landlock"),
         "bwrap": ("--shell-sandbox", "bwrap")}  # fmt: skip
ENDINGS = ("close", "sigterm", "sigkill")
MARK = "4242"  # the markers' prefix: `sleep 4242.<digits>`


def start(root: Path, mode: str) -> StdioServer:
    return StdioServer(root, *MODES[mode], "--shell-timeout", str(TIME_LIMIT))


@dataclass
class Scene:
    """What one server, in one sandbox mode and ended one way, left behind."""

    mode: str
    ending: str
    foreground: dict[str, str] = field(default_factory=dict)  # escape -> marker
    timed_out: dict[str, str] = field(default_factory=dict)
    background: dict[str, str] = field(default_factory=dict)
    alive_after_timeout: dict[str, list[int]] = field(default_factory=dict)
    alive_while_running: dict[str, list[int]] = field(default_factory=dict)
    alive_after_end: dict[str, list[int]] = field(default_factory=dict)
    results: dict[str, dict] = field(default_factory=dict)

    def markers(self) -> dict[str, str]:
        kinds = {"fg": self.foreground, "timed": self.timed_out, "bg": self.background}
        return {f"{kind}:{name}": mark for kind, marks in kinds.items() for name, mark in marks.items()}


def begin(server: StdioServer, scene: Scene) -> int:
    """Every escape in one call that runs into its time limit; it stays in flight while `play` goes on."""
    scene.timed_out = {name: marker(MARK) for name in ESCAPES}
    command = "\n".join(ESCAPES[name].format(m=mark) for name, mark in scene.timed_out.items())
    return server.start_shell(f"{command}\nsleep 60")


def play(server: StdioServer, scene: Scene, timed: int) -> None:
    """Every escape in a call of its own, then a few background commands; then the timed call's end."""
    for name, template in ESCAPES.items():
        scene.foreground[name] = mark = marker(MARK)
        scene.results[f"fg:{name}"] = server.shell(template.format(m=mark))
    for name, template in BACKGROUND.items():
        scene.background[name] = mark = marker(MARK)
        scene.results[f"bg:{name}"] = server.shell(template.format(m=mark), is_background=True, delay_ms=300)
    wait_for(lambda: all(holders_of(list(scene.background.values())).values()), timeout=5)
    alive = holders_of(list(scene.background.values()))
    scene.alive_while_running = {name: alive[mark] for name, mark in scene.background.items()}
    scene.results["timed"] = server.shell_result(timed)
    alive = holders_of(list(scene.timed_out.values()))
    scene.alive_after_timeout = {name: alive[mark] for name, mark in scene.timed_out.items()}


@pytest.fixture(scope="module", params=list(MODES))
def scenes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scene]:
    """One mode's three servers, played at once (their timed calls wait together), then each ended its
    own way; what is left of them is found, recorded and killed."""
    mode = request.param
    root = tmp_path_factory.mktemp(f"lifetime-{mode}") / "root"
    root.mkdir()
    played = {ending: Scene(mode, ending) for ending in ENDINGS}
    servers: dict[str, StdioServer] = {}
    try:
        for ending in ENDINGS:
            servers[ending] = start(root, mode)
        for server in servers.values():
            server.ready()
        timed = {ending: begin(server, played[ending]) for ending, server in servers.items()}
        for ending, server in servers.items():
            play(server, played[ending], timed[ending])
    finally:
        for ending, server in servers.items():
            server.end(ending)
        marks = [m for scene in played.values() for m in scene.markers().values()]
        wait_for(lambda: not any(holders_of(marks).values()), timeout=GONE_WITHIN, interval=0.1)
        alive = holders_of(marks)
        for scene in played.values():
            scene.alive_after_end = {key: alive[m] for key, m in scene.markers().items()}
            for pid in {pid for pids in scene.alive_after_end.values() for pid in pids}:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    return played


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("escape", ESCAPES)
def test_foreground_escape_ends_with_the_server(scenes: dict[str, Scene], ending: str, escape: str) -> None:
    """A foreground call's process that left its session, group, parent or marker is gone once the server
    has ended (closed stdin, SIGTERM, or SIGKILL, which no handler of the server's sees)."""
    scene, key = scenes[ending], f"fg:{escape}"
    assert scene.results[key]["exit_code"] == 0, scene.results[key]
    assert scene.alive_after_end[key] == [], (
        f"`{ESCAPES[escape]}` outlived the server ({scene.mode}, {ending}): PIDs {scene.alive_after_end[key]}"
    )


@pytest.mark.parametrize("escape", ESCAPES)
def test_a_call_stopped_by_its_time_limit_takes_every_process_it_started(scenes: dict[str, Scene], escape: str) -> None:
    """A foreground call stopped by --shell-timeout leaves nothing alive when it returns: not even what
    escaped its process group and dropped the marker before the limit (played in all three servers)."""
    for scene in scenes.values():
        assert scene.results["timed"]["error"], scene.results["timed"]  # stopped by the limit
        assert scene.alive_after_timeout[escape] == [], (
            f"`{ESCAPES[escape]}` outlived its stopped call ({scene.mode}): PIDs {scene.alive_after_timeout[escape]}"
        )


@pytest.mark.parametrize("variant", BACKGROUND)
def test_background_command_runs_while_the_server_runs(scenes: dict[str, Scene], variant: str) -> None:
    """`is_background` keeps the command (and what it started) running after the call returns."""
    for scene in scenes.values():
        result = scene.results[f"bg:{variant}"]
        assert result.get("background") is True, result
        assert scene.alive_while_running[variant], f"`{BACKGROUND[variant]}` was not running while the server ran"


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("variant", BACKGROUND)
def test_background_command_ends_with_the_server(scenes: dict[str, Scene], ending: str, variant: str) -> None:
    """Nothing a background command started outlives the server, however the server ends."""
    scene, key = scenes[ending], f"bg:{variant}"
    assert scene.alive_after_end[key] == [], (
        f"`{BACKGROUND[variant]}` outlived the server ({scene.mode}, {ending}): PIDs {scene.alive_after_end[key]}"
    )
