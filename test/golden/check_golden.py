#!/usr/bin/env python3
"""Compares the output of a maxc command with an expected ("golden") file.

    test/golden/check_golden.py --maxc build/bin/maxc --source-dir . \\
        --model examples/gpt/model.json --expected test/golden/gpt.trace.txt \\
        [--subcommand trace] [--args="--emit dot"]

Runs `maxc SUBCOMMAND MODEL ARGS...` in the source directory (a relative
--model is relative to it), requires exit status 0, and compares stdout with
the expected file. On a mismatch it prints a unified diff (expected → actual)
and exits 1.

When the change is intended, regenerate the expected file by running the same
command with MAXC_UPDATE_GOLDEN=1 in the environment, e.g.

    MAXC_UPDATE_GOLDEN=1 ctest -R golden- --test-dir build

then review the change with `git diff test/golden/`.

Give --args with '=' (--args="--emit dot"): its value starts with '-'.
Only the Python standard library is used.
"""

import argparse
import difflib
import os
import shlex
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--maxc", required=True, help="the maxc binary")
    parser.add_argument("--source-dir", required=True, help="the maxc source tree; the command runs there")
    parser.add_argument("--model", required=True, help="the model, relative to --source-dir or absolute")
    parser.add_argument("--expected", required=True, help="the expected output file")
    parser.add_argument("--subcommand", default="trace", help="the maxc subcommand (default: trace)")
    parser.add_argument("--args", default="", help="more arguments, one shell-quoted string")
    args = parser.parse_args()

    source_dir = os.path.abspath(args.source_dir)
    expected_path = os.path.abspath(args.expected)
    cmd = [os.path.abspath(args.maxc), args.subcommand, args.model] + shlex.split(args.args)
    shown = " ".join(shlex.quote(c) for c in ["maxc"] + cmd[1:])
    try:
        r = subprocess.run(cmd, cwd=source_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    except subprocess.TimeoutExpired:
        print("FAIL: timed out: %s" % shown)
        return 1
    actual = r.stdout.decode("utf-8", "replace")
    stderr = r.stderr.decode("utf-8", "replace")
    if r.returncode != 0:
        print("FAIL: `%s` (in %s) exited with %d\n--- stderr ---\n%s" % (shown, source_dir, r.returncode, stderr))
        return 1

    if os.environ.get("MAXC_UPDATE_GOLDEN") == "1":
        tmp = expected_path + ".tmp.%d" % os.getpid()
        with open(tmp, "w", newline="\n") as f:
            f.write(actual)
        os.replace(tmp, expected_path)
        print("updated %s from `%s`; review it with `git diff`" % (expected_path, shown))
        return 0

    try:
        with open(expected_path, newline="") as f:
            expected = f.read()
    except OSError as e:
        print("FAIL: cannot read the expected file: %s" % e)
        print("Create it with: MAXC_UPDATE_GOLDEN=1 %s" % " ".join(shlex.quote(a) for a in sys.argv))
        return 1

    if actual == expected:
        print("ok   %s matches %s" % (shown, os.path.relpath(expected_path, source_dir)))
        return 0

    rel = os.path.relpath(expected_path, source_dir)
    diff = difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                fromfile="expected: " + rel, tofile="actual: " + shown)
    print("FAIL: the output of `%s` differs from %s:" % (shown, rel))
    for line in diff:
        sys.stdout.write(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    if stderr:
        print("--- stderr ---\n" + stderr)
    print("\nIf the change is intended, regenerate the expected file and review it:\n"
          "  MAXC_UPDATE_GOLDEN=1 ctest --test-dir <build> -R golden-    # or:\n"
          "  MAXC_UPDATE_GOLDEN=1 %s\n"
          "  git diff %s" % (" ".join(shlex.quote(a) for a in [sys.executable] + sys.argv), rel))
    return 1


if __name__ == "__main__":
    sys.exit(main())
