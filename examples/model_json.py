"""Writes maxc model JSON (docs/model-format.md) the way the example
generators do: one statement (or other short value) per line. Shared by
examples/gpt/generate.py and examples/llama/generate.py; standard library
only."""

import json

# Width at which a JSON value is written on one line.
INLINE_WIDTH = 100


def dump(value, indent=0, key=None):
    """JSON with one statement (or other short value) per line."""
    compact = json.dumps(value, separators=(", ", ": "))
    if len(compact) + indent <= INLINE_WIDTH or not isinstance(value, (dict, list)):
        return compact
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = ["%s%s: %s" % (pad, json.dumps(k), dump(v, indent + 2, k)) for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if key in ("body", "main"):  # statements: always one per line
        items = [pad + json.dumps(v, separators=(", ", ": ")) for v in value]
    else:
        items = [pad + dump(v, indent + 2) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
