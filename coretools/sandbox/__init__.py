"""What keeps the tools inside their workspace: here, the one engine for glob and ignore patterns."""
