"""Shared helpers of maxc's Python test runners (test/cli, test/e2e):
failures with the command's output attached, and small assertions."""
import os


class Failure(Exception):
    pass


def tail(text, limit=4000):
    return text if len(text) <= limit else "...\n" + text[-limit:]


def describe(r):
    """A finished command (with .cmd, .returncode, .stdout, .stderr) as text."""
    out = r.stdout if isinstance(r.stdout, str) else "<%d bytes>" % len(r.stdout)
    return "command: %s\nexit: %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        " ".join(r.cmd), r.returncode, tail(out), tail(r.stderr))


def expect(cond, message, r=None):
    if not cond:
        raise Failure(message + ("\n" + describe(r) if r is not None else ""))


def expect_in(needle, haystack, what, r=None):
    expect(needle in haystack, "expected %r in %s" % (needle, what), r)


def listing(directory):
    return sorted(os.listdir(directory))
