"""Workspace services: what the tools keep about a workspace beyond the boundary itself. The sandbox
(`coretools.sandbox`) decides what may be touched; this layer remembers and explains:

* `journal` (the edit journal behind `history` and `undo`) and `records` (its append-only record files);
* `views` (the stale-write record: each file as the session last saw it);
* `hints` (the paths a not-found path likely meant; `HintedWorkspace`, the gateway tools are given);
* `background` (commands the shell tool left running, and their output);
* `walk_from` (resumable walks for the server's resource pages), `ignore_reason` (which ignore rule hid a
  path, for glob's and list_directory's notes).

It imports `coretools.sandbox` and `coretools.errors`; the tools, the server and the CLI import it; the
sandbox never does.
"""
