"""One module per command group; each function parses flags, calls a pure module and emits its result."""
