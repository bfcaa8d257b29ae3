"""The agent surface: one registry of typed operations, exposed as `tools <group> <op> --json` and as MCP tools."""
