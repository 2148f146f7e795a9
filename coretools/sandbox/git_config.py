"""Git's configuration syntax, and which of its settings run programs.

`parse_config` reads a configuration file as git's own parser does (`config.c`: sections `[a "b"]` and
`[a.b]`, case-insensitive section and variable names, quotes, escapes, comments, backslash continuations),
without running git, and leniently: where git would refuse the file, only the offending line is skipped, so
a setting is rather reported once too often than missed. `runs` says when git runs the program a variable
names (`core.fsmonitor`: on `git status`), `hook_runs` the same for a hook.
"""

from __future__ import annotations

_FALSE = frozenset({"false", "no", "off", "0", ""})
_BOOLEAN = _FALSE | {"true", "yes", "on", "1"}


def parse_config(text: str) -> list[tuple[str, str | None, str, str | None]]:
    """Each variable of git configuration `text` as (section, subsection, name, value): section and name
    lowercased, a `[section "sub"]` subsection kept as written (`[section.sub]` lowercased), value None
    for a bare name (boolean true)."""
    text = text.replace("\r\n", "\n")
    i = 1 if text.startswith("\ufeff") else 0
    n = len(text)
    out: list[tuple[str, str | None, str, str | None]] = []
    section: tuple[str, str | None] | None = None
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c in "#;":
            i = _line_end(text, i)
        elif c == "[":
            section, i = _header(text, i + 1)
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and (text[j].isascii() and text[j].isalnum() or text[j] == "-"):
                j += 1
            name = text[i:j].lower()
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "=":
                value, i = _value(text, j + 1)
            elif j >= n or text[j] == "\n":
                value, i = None, j
            else:
                i = _line_end(text, j)
                continue
            if section is not None:
                out.append((*section, name, value))
        else:
            i = _line_end(text, i)
    return out


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end + 1


def _header(text: str, i: int) -> tuple[tuple[str, str | None] | None, int]:
    """`[section]`, `[section "sub"]` or `[section.sub]` from just after the `[`: the pair, and where the
    rest of the line (which may hold a variable) starts; None for a header git refuses."""
    n = len(text)
    j = i
    while j < n and (text[j].isascii() and text[j].isalnum() or text[j] in "-."):
        j += 1
    name = text[i:j].lower()
    section, dot, sub = name.partition(".")
    if j < n and text[j] == "]":
        return (section, sub if dot else None), j + 1
    if j >= n or text[j] not in " \t\r":
        return None, _line_end(text, i)
    while j < n and text[j] in " \t\r":
        j += 1
    if j >= n or text[j] != '"':
        return None, _line_end(text, i)
    j += 1
    quoted: list[str] = []
    while j < n and text[j] not in '"\n':
        if text[j] == "\\" and j + 1 < n and text[j + 1] != "\n":
            j += 1
        quoted.append(text[j])
        j += 1
    if j + 1 >= n or text[j] != '"' or text[j + 1] != "]":
        return None, _line_end(text, i)
    return (section, f"{sub}.{''.join(quoted)}" if dot else "".join(quoted)), j + 2


def _value(text: str, i: int) -> tuple[str, int]:
    """A value from just after its `=`, up to the end of its (continued) line, as git's parse_value."""
    n = len(text)
    out: list[str] = []
    quote = comment = False
    spaces = 0
    while i < n:
        c = text[i]
        i += 1
        if c == "\n":
            break
        if comment:
            continue
        if c in " \t\r" and not quote:
            spaces += 1 if out else 0
            continue
        if c in "#;" and not quote:
            comment = True
            continue
        if spaces:
            out.append(" " * spaces)
            spaces = 0
        if c == "\\":
            if i >= n:
                break
            c = text[i]
            i += 1
            if c == "\n":
                continue
            c = {"t": "\t", "b": "\b", "n": "\n"}.get(c, c)
        elif c == '"':
            quote = not quote
            continue
        out.append(c)
    return "".join(out), i


# -- which settings run programs, and when ----------------------------------------------------------------

_CORE = {
    "hookspath": "runs its hooks (on `git commit`, `git checkout`, `git merge`, `git push`, ...)",
    "sshcommand": "runs on `git fetch`, `git pull`, `git push` and `git clone` over ssh",
    "gitproxy": "runs on `git fetch`, `git pull` and `git clone` over git://",
    "askpass": "runs when git asks for a password (`git fetch`, `git push`, ...)",
    "pager": "runs when git pages its output (`git log`, `git diff`, `git show`, ...)",
    "editor": "runs when git opens an editor (`git commit` without -m, `git rebase -i`, ...)",
    "alternaterefscommand": "runs on `git fetch` and `git push` into a repository with alternates",
}
_SUBSECTION_NAMES = {
    ("diff", "textconv"): "runs on `git diff`, `git log -p` and `git show` of files whose attribute names it",
    ("diff", "command"): "runs on `git diff` of files whose attribute names it",
    ("merge", "driver"): "runs on `git merge`, `git rebase` and `git pull` of files whose attribute names it",
    ("filter", "clean"): "runs on `git add`, `git status` and `git diff` of files whose attribute names it",
    ("filter", "smudge"): "runs on `git checkout`, `git switch` and `git reset` of files whose attribute names it",
    ("filter", "process"): "runs on `git add`, `git status` and `git checkout` of files whose attribute names it",
    ("trailer", "command"): "runs on `git commit --trailer` and `git interpret-trailers`",
    ("trailer", "cmd"): "runs on `git commit --trailer` and `git interpret-trailers`",
    ("difftool", "cmd"): "runs on `git difftool`",
    ("difftool", "path"): "runs on `git difftool`",
    ("mergetool", "cmd"): "runs on `git mergetool`",
    ("mergetool", "path"): "runs on `git mergetool`",
    ("guitool", "cmd"): "runs from `git gui`",
    ("browser", "cmd"): "runs on `git help --web` and `git instaweb`",
    ("browser", "path"): "runs on `git help --web` and `git instaweb`",
    ("man", "cmd"): "runs on `git help`",
    ("man", "path"): "runs on `git help`",
    ("remote", "uploadpack"): "runs on `git fetch` and `git pull` from that remote",
    ("remote", "receivepack"): "runs on `git push` to that remote",
}
_PLAIN = {
    ("diff", "external"): "runs on `git diff`",
    ("sequence", "editor"): "runs on `git rebase -i`",
    ("uploadpack", "packobjectshook"): "runs when another repository fetches from this one",
    ("init", "templatedir"): "its hooks are copied into every repository `git init` or `git clone` makes",
    ("interactive", "difffilter"): "runs on `git add -p`",
    ("include", "path"): "brings in that file's settings",
}
_HOOKS = {
    "pre-commit": "`git commit`", "prepare-commit-msg": "`git commit`", "commit-msg": "`git commit`",
    "post-commit": "`git commit`", "pre-merge-commit": "`git merge`", "post-merge": "`git merge` and `git pull`",
    "pre-rebase": "`git rebase`", "post-rewrite": "`git commit --amend` and `git rebase`",
    "post-checkout": "`git checkout`, `git switch` and `git clone`", "pre-push": "`git push`",
    "reference-transaction": "every ref update (`git commit`, `git fetch`, `git checkout`, ...)",
    "post-index-change": "every index update (`git status`, `git add`, ...)",
    "pre-auto-gc": "`git gc --auto`, which many commands start", "fsmonitor-watchman": "`git status`",
    "applypatch-msg": "`git am`", "pre-applypatch": "`git am`", "post-applypatch": "`git am`",
    "pre-receive": "a push into this repository", "update": "a push into this repository",
    "post-receive": "a push into this repository", "post-update": "a push into this repository",
    "proc-receive": "a push into this repository", "push-to-checkout": "a push into this repository",
    "sendemail-validate": "`git send-email`", "post-applypatch-msg": "`git am`",
}  # fmt: skip


def runs(section: str, sub: str | None, name: str, value: str | None) -> str | None:
    """When git runs a program this variable names ("runs on `git status`"), or None if it names none."""
    text = "" if value is None else value.strip()
    if section == "core" and sub is None:
        if name == "fsmonitor":  # true and false select git's own daemon, anything else is a program
            return None if value is None or text.lower() in _BOOLEAN else "runs on `git status`, `git diff` and " \
                "every command that refreshes the index"
        return _CORE.get(name) if text else None
    if sub is not None and (section, name) in _SUBSECTION_NAMES:
        return _SUBSECTION_NAMES[section, name] if text else None
    if sub is None and (section, name) in _PLAIN:
        return _PLAIN[section, name] if text else None
    if section == "includeif" and sub is not None and name == "path":
        return "brings in that file's settings (when its condition holds)" if text else None
    if section == "alias" and sub is None:
        return f"runs on `git {name}`" if text.startswith("!") else None
    if section == "pager" and sub is None:
        return None if value is None or text.lower() in _BOOLEAN else f"runs on `git {name}`"
    if section == "credential" and name == "helper":
        return "runs on `git fetch`, `git push` and `git clone` over http(s)" if text else None
    if section == "gpg" and (name == "program" or (sub == "ssh" and name == "defaultkeycommand")):
        return "runs on signing or verifying commits and tags (`git commit -S`, `git log --show-signature`)" \
            if text else None  # fmt: skip
    if section == "submodule" and sub is not None and name == "update":
        return "runs on `git submodule update`" if text.startswith("!") else None
    if section == "sendemail" and (name.endswith("cmd") and text or name == "smtpserver" and text.startswith("/")):
        return "runs on `git send-email`"
    if section == "protocol" and name == "allow" and sub in (None, "ext") and text.lower() in ("always", "user"):
        return "lets an `ext::` remote URL run any command (`git fetch`, `git clone`, `git submodule update`)"
    return None


def hook_runs(name: str) -> str:
    when = _HOOKS.get(name)
    return f"runs on {when}" if when else f"runs when git runs its `{name}` hook"
