"""search_file_content, a package of its own, one noun per module:

- `tool`: the tool (its options, schema and call): what is searched, by which engine, and the answer;
- `scope`: where it searches (the targets a `path` names, the `include` filter, why a named directory is
  not searched);
- `results`: the request, the lines each file contributes, the collector of all of them, and how one line
  is shown;
- `engines`: ripgrep (the normal one) and the pure-Python fallback, reporting into one collector;
- `reported`: what rg reports about a file, kept only as far as the gateway's own copy confirms it;
- `listing`: the files named to rg when rg does not walk a directory itself, and what that walk left out;
- `regex`: the caller's regexes on RE2 (the fallback engine, long lines, `exclude_pattern`);
- `format`: the answer's text within the result budget.

Running rg with our rules (arguments, environment, the runner, its records) is the sandbox's
(`coretools.sandbox.ripgrep`); everything shaped from what it reports is here.
"""

from __future__ import annotations

from coretools.tools.search.tool import TOOL, SearchFileContent

__all__ = ["TOOL", "SearchFileContent"]
