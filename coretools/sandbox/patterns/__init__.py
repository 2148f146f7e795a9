"""One parser for every glob-like pattern the tools take, into one small syntax tree.

Dialects, each a module here:

* `glob`: the Gemini glob of glob's `pattern` and read_many_files' paths, include and exclude (and, with
  `paths=False, negate=False`, list_directory's `ignore`, matched against an entry's name): `*`, `?`,
  `[...]` (ranges, `!`/`^`, POSIX `[:alpha:]`), `\\` escapes, `**` as a whole segment (any number of
  directories), braces `{a,b}` and `{1..3}` expanded first (`braces`: at most `MAX_EXPANSIONS` patterns),
  extglob `@(a|b)`, `*(..)`, `+(..)`, `?(..)` and `!(..)`, and a leading `!` that makes the pattern an
  exclusion.
* `gitignore`: one line of a `.gitignore`, `.geminiignore` or `.git/info/exclude`, with git's anchoring (a
  slash before the end anchors at the file's directory), a trailing `/` (directories only), `!` negation,
  `**` and escapes.
* `include`: search_file_content's `include` filter: ripgrep's `--glob` reading of it (no slash: the file
  name at any depth; a slash: anchored at the searched directory).

The tree (`tree.Node`) is a regular expression over a path: text, one character of a set, sequence,
alternation, bounded or unbounded repetition, the gitignore "matched through a directory" mark, the end,
and `Exclude`: one path segment that matches except where the inner pattern does. Back-ends:
`coretools.sandbox.matcher` (in-process, linear time: RE2, and a segment-by-segment automaton for
`Exclude`) and `coretools.sandbox.rgglobs` (ripgrep arguments).

Extglob negation `!(P)` cannot be a linear-time regex (it needs look-ahead), so it is matched then
excluded on its own segment: `A!(P)B` matches a name made of a part A matches, then any text that P does
not match as a whole, then a part B matches. It may stand once in a segment, outside other groups; any
other use is refused with a `PatternError` that names the pattern.
"""
