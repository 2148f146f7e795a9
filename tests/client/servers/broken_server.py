"""An MCP server that cannot start: it says why on stderr and exits with code 3 (no imports, so it fails fast)."""

import sys

print("broken_server: starting", file=sys.stderr)
print(f"broken_server: fatal: environment variable {sys.argv[1] if len(sys.argv) > 1 else 'TOKEN'} is not set", file=sys.stderr)
sys.exit(3)
