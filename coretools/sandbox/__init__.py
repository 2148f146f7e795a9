"""What keeps the tools inside their workspace, a module per noun:

* containment: `paths` (what a path argument may name), `kernel` (resolution beneath a root descriptor),
  `gateway` (the workspace: roots, opening, listing), `writes`, `durable`, `locks`, `nofollow` (paths
  another program reported), `memory_file`;
* the walker: `walk` (with glob's fast path on `rg --files`);
* patterns: `patterns` (one parser, a module per dialect) and its two back-ends, `matcher` (in-process)
  and `rgglobs` (ripgrep arguments); `ignore` (the ignore engine), `casefold`;
* programs: `runner` (the one process runner), `process_groups`, `process_settings`, `hardened_env`,
  `bwrap` and `seccomp` (the sandbox), `ripgrep` (rg driven with our rules, on the runner);
* policies: `shell_policy` and `exec_policy` (which commands may run), `netpolicy` and `pinned_http`
  (which addresses web_fetch may reach);
* `grammar_input`: the ASCII view of untrusted text that tree-sitter grammars are shown.
"""
