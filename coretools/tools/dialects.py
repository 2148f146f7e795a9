"""Building a tool's newest Gemini CLI schema from its published one, so the two share their wording.

Gemini CLI renamed parameters over time (`absolute_path` -> `file_path`, `path` -> `dir_path`, offset/limit
-> start_line/end_line...). A tool publishes the first version's schema by default and accepts every later
name (`Tool.aliases`, `Tool.extra_properties`); `--schema-dialect latest` publishes the newest version's
schema instead, for hosts that check arguments against the published schema before sending them.
"""

from __future__ import annotations

import copy
from typing import Any


def latest_from(
    seed: dict[str, Any],
    *,
    rename: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
    add: dict[str, dict[str, Any]] | None = None,
    required: list[str] | None = None,
) -> dict[str, Any]:
    """`seed` with parameters renamed (published name -> newer name, keeping their place and description),
    some dropped, newer ones added at the end, and `required` given in the newer names (default: the seed's,
    renamed)."""
    rename = rename or {}
    props: dict[str, Any] = {}
    for name, schema in seed.get("properties", {}).items():
        if name not in drop:
            props[rename.get(name, name)] = copy.deepcopy(schema)
    props.update(copy.deepcopy(add or {}))
    if required is None:
        required = [rename.get(n, n) for n in seed.get("required", []) if n not in drop]
    out = {k: copy.deepcopy(v) for k, v in seed.items() if k not in ("properties", "required")}
    out["properties"] = props
    if required:
        out["required"] = required
    return out
