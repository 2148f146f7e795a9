"""What every entry of the argument policy reads a command line with: the words (`Word`, `Pattern`), the
verdicts (`ArgumentRefused`, `Launch`) and the paths a program may not name (protected paths, outside the
working directory). Options are read by `getopt.py`, words are made by `expansion.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coretools.sandbox.paths import word_protected_reason

Word = str | None  # None: a word whose value the parse cannot know


class Pattern(str):
    """A word with unquoted `*`, `?` or `[`: bash may replace it by the names of files it matches (any
    number of them). `glob` is the pattern itself, quoted glob characters escaped (`'*'` is `[*]`)."""

    glob: str

    def __new__(cls, value: str, glob: str | None = None) -> Pattern:
        word = super().__new__(cls, value)
        word.glob = value if glob is None else glob
        return word


class ArgumentRefused(Exception):
    """An argument of a table program is refused; `why` names the part."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(frozen=True)
class Launch:
    """A command a program would run; `clean_env` when it runs without the caller's environment."""

    argv: list[Word]
    clean_env: bool = False


Entry = Callable[[str, list[Word], bool], list[Launch]]
EXPANDS_FIRST = set("*?[")
STRICT = "while an allowlist is active"

def refuse(why: str) -> ArgumentRefused:
    return ArgumentRefused(why)


def literal_args(name: str, args: list[Word]) -> None:
    """Every argument must be known, and may not expand into an option."""
    for word in args:
        if word is None:
            raise refuse(f"an argument of {name} is not literal (an expansion), so what {name} would do cannot be "
                         f"checked; write it out {STRICT}")  # fmt: skip
        if isinstance(word, Pattern) and word.glob[:1] in EXPANDS_FIRST | {"-"}:
            raise refuse(f"{name} argument `{word}` is a glob that could expand to an option; quote it, or start "
                         "it with ./")  # fmt: skip


def below(name: str, what: str, path: str) -> None:
    """A directory or file to write must be a relative path below the working directory."""
    parts = path.split("/")
    if path.startswith(("/", "~")) or ".." in parts:
        raise refuse(f"{name} {what} `{path}` leaves the working directory; use a relative path below it {STRICT} "
                     "(or the tool's `directory` argument)")  # fmt: skip
    reason = protected(path)
    if reason is not None:
        raise refuse(f"{name} {what} `{path}` is {reason}")


def protected(word: str) -> str | None:
    """Why `word` names a protected path (`word_protected_reason`, one rule for every layer), or None."""
    return word_protected_reason(word, word.glob if isinstance(word, Pattern) else None)


def protected_refusal(shown: str, reason: str) -> str:
    """The refusal of an argument that names a protected path, with what naming it would allow."""
    harm = ("writes there would plant git configuration, which names programs to run" if ".git" in reason
            else "it holds secrets, which the file tools do not show either")  # fmt: skip
    return f"`{shown}` is {reason} (or may expand to one): {harm}; it may not be named {STRICT}"
