#!/usr/bin/env python3
"""The link structure of the component libraries follows the layer table.

For every component archive build/lib/libmaxc_<c>.a, every symbol it uses
(nm: undefined) that another component defines must come from a component
it may use (cmake/MaxcLayers.cmake). So a lower layer calling into a higher
one fails even when no #include says so (a declaration written by hand).

    link_layering.py SOURCE_DIR LIB_DIR
"""
import re
import subprocess
import sys
from pathlib import Path


def layers(source_dir):
    text = (Path(source_dir) / "cmake" / "MaxcLayers.cmake").read_text()
    comps = re.search(r"set\(MAXC_COMPONENTS ([^)]*)\)", text).group(1).split()
    allowed = {c: set() for c in comps}
    for name, deps in re.findall(r"set\(MAXC_LAYER_(\w+)((?: [^)]*)?)\)", text):
        allowed[name] = set(deps.split())
    return comps, allowed


def symbols(archive, flag):
    out = subprocess.run(["nm", flag, "--format=posix", str(archive)], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        # posix format: "name type [value size]"; archive members end with ':'
        if len(parts) >= 2 and not parts[0].endswith(":") and not line.endswith(":"):
            if flag == "--defined-only" and parts[1] in "Ww":
                continue  # weak: inline functions and templates, defined everywhere
            names.add(parts[0])
    return names


def main():
    source_dir, lib_dir = sys.argv[1], Path(sys.argv[2])
    comps, allowed = layers(source_dir)
    archives = {c: lib_dir / f"libmaxc_{c.lower()}.a" for c in comps}
    archives = {c: a for c, a in archives.items() if a.exists()}
    if len(archives) < 5:
        print(f"FAIL: expected the component archives in {lib_dir}", file=sys.stderr)
        return 1
    defined = {c: symbols(a, "--defined-only") for c, a in archives.items()}
    owner = {}
    for c, names in defined.items():
        for n in names:
            owner.setdefault(n, c)
    bad = 0
    for c, a in archives.items():
        for n in sorted(symbols(a, "--undefined-only") - defined[c]):
            d = owner.get(n)
            if d and d != c and d not in allowed[c]:
                print(f"{a.name}: {c} uses {n} from {d}, which it may not use", file=sys.stderr)
                bad += 1
    if bad:
        print(f"FAIL: {bad} symbol(s) cross the layering", file=sys.stderr)
        return 1
    print(f"PASS: {len(archives)} component libraries link only downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
