#!/usr/bin/env python3
"""End-to-end tests of the `maxc` command line.

    test/cli/cli_test.py --maxc build/bin/maxc --source-dir . --case NAME
    test/cli/cli_test.py --list
    test/cli/cli_test.py --maxc build/bin/maxc --source-dir . --all

Each case is one ctest entry (test/CMakeLists.txt registers "cli-NAME" for
every name --list prints). A case whose docstring says "Fails with maxc ..."
checks behaviour that a known maxc bug breaks: it fails until the bug is
fixed and carries the ctest label "known-bug" (`ctest -LE known-bug` skips
them); the docstring says where the bug is. A case runs maxc as a subprocess in a fresh
temporary directory and checks exit codes, stdout/stderr and written files.
Exit status: 0 pass, 1 fail (with an explanation), 2 bad usage.

Needs only the Python standard library: small .npy and safetensors
readers/writers are below, and the MLP reference computation is plain Python.
The example weights (examples/<name>/<name>.safetensors) come from the build
(the `example-weights` target).
"""

import argparse
import array
import json
import operator
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from maxc_testlib import Failure, describe, expect, expect_in, listing, read_npy, tail, write_npy  # noqa: E402

EXAMPLES = ["mlp", "cnn", "gpt"]


# ---------------------------------------------------------------------------
# Running maxc


class Context:
    def __init__(self, maxc, source_dir, tmp):
        self.maxc = maxc
        self.source_dir = source_dir
        self.tmp = tmp

    def example(self, name):
        return os.path.join(self.source_dir, "examples", name, "model.json")

    def weights(self, name):
        path = os.path.join(self.source_dir, "examples", name, name + ".safetensors")
        if not os.path.exists(path):
            raise Failure("%s is missing: build the 'example-weights' target first" % path)
        return path

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def run(self, args, rc=None, cwd=None, binary=False):
        """Runs maxc with `args`; checks the exit status when `rc` is given."""
        cmd = [self.maxc] + list(args)
        try:
            r = subprocess.run(cmd, cwd=cwd or self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=120)
        except subprocess.TimeoutExpired:
            raise Failure("timed out: %s" % " ".join(cmd))
        r.cmd = cmd
        if not binary:
            r.stdout = r.stdout.decode("utf-8", "replace")
        r.stderr = r.stderr.decode("utf-8", "replace")
        if rc is not None and r.returncode != rc:
            raise Failure("expected exit %d, got %d\n%s" % (rc, r.returncode, describe(r)))
        return r


def expect_diagnostic(r, file, code, pointer=None, message=None):
    """Checks stderr for a text diagnostic `FILE: [POINTER: ]error[CODE]: message`."""
    prefix = re.escape(file) + ": "
    if pointer is not None:
        prefix += re.escape(pointer) + ": "
    pattern = "^" + prefix + r"error\[" + re.escape(code) + r"\]: (.*)$"
    for line in r.stderr.splitlines():
        m = re.match(pattern, line)
        if m and (message is None or re.search(message, m.group(1))):
            return line
    raise Failure("no diagnostic matching %r%s on stderr" % (
        pattern, "" if message is None else " with message matching %r" % message) + "\n" + describe(r))


def parse_json(text, what, r=None):
    try:
        return json.loads(text)
    except ValueError as e:
        raise Failure("%s is not valid JSON: %s" % (what, e) + ("\n" + describe(r) if r is not None else ""))


def project_version(source_dir):
    with open(os.path.join(source_dir, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*maxc\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise Failure("cannot find project(maxc VERSION ...) in CMakeLists.txt")
    return m.group(1)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    return path


def load_example_json(ctx, name):
    with open(ctx.example(name)) as f:
        return json.load(f)


def stats_of(text):
    stats = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)=(\S+)$", line)
        if not m:
            raise Failure("stats line is not key=value: %r" % line)
        stats[m.group(1)] = m.group(2)
    return stats


# ---------------------------------------------------------------------------
# .npy and safetensors


def read_safetensors(path):
    """Reads a safetensors file: ({name: (dtype, shape, array of values)}, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise Failure("%s: shorter than the header length" % path)
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if info["dtype"] != "F32":
            raise Failure("%s: %s is %s; this reader handles F32" % (path, name, info["dtype"]))
        values = array.array("f")
        values.frombytes(body[begin:end])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = (info["dtype"], info["shape"], values)
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes F32 tensors {name: (shape, list of values)}."""
    header, body = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        shape, values = tensors[name]
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)
    return path


# ---------------------------------------------------------------------------
# Cases

CASES = {}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


@case
def version(ctx):
    r = ctx.run(["--version"], rc=0)
    lines = r.stdout.splitlines()
    expect(len(lines) >= 3, "expected 3 lines (maxc, LLVM, targets)", r)
    expect(lines[0] == "maxc " + project_version(ctx.source_dir),
           "first line should be 'maxc %s'" % project_version(ctx.source_dir), r)
    expect(re.match(r"^LLVM 19\.\d+\.\d+$", lines[1]) is not None, "second line should be 'LLVM 19.x.y'", r)
    expect(lines[2].startswith("targets: "), "third line should list the targets", r)


@case
def version_json(ctx):
    r = ctx.run(["--version", "--json"], rc=0)
    doc = parse_json(r.stdout, "--version --json", r)
    expect(doc.get("maxc") == project_version(ctx.source_dir), "'maxc' should be the project version", r)
    expect(isinstance(doc.get("llvm"), str) and doc["llvm"].startswith("19."), "'llvm' should be 19.x", r)
    targets = doc.get("targets")
    expect(isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets),
           "'targets' should be a non-empty list of strings", r)
    text = ctx.run(["--version"], rc=0).stdout.splitlines()[2]
    expect(text == "targets: " + " ".join(targets), "text and JSON target lists differ:\n%s\n%s" % (text, targets))


@case
def help(ctx):
    r = ctx.run(["--help"], rc=0)
    out = r.stdout
    for sub in ["check", "trace", "run", "init-weights", "ops"]:
        expect(re.search(r"^\s+%s\s" % re.escape(sub), out, re.M) is not None, "subcommand %s not listed" % sub, r)
    expect_in("Exit codes:", out, "--help", r)
    for code in ["0", "1", "2"]:
        expect(re.search(r"^\s+%s\s+\S" % code, out, re.M) is not None, "exit code %s not explained" % code, r)
    expect_in("internal error", out, "--help", r)
    expect_in("Examples:", out, "--help", r)
    examples = [l.strip() for l in out.splitlines() if l.strip().startswith("maxc ")]
    expect(len(examples) >= 3, "expected several example command lines", r)
    # Every example model the help mentions must exist in the source tree.
    for line in examples:
        for word in line.split():
            if word.startswith("examples/") and word.endswith(".json"):
                expect(os.path.exists(os.path.join(ctx.source_dir, word)), "help mentions missing %s" % word, r)
    # Subcommand help works too.
    r = ctx.run(["trace", "--help"], rc=0)
    for flag in ["--emit", "--stats", "--no-weights", "--weights", "-o"]:
        expect_in(flag, r.stdout, "trace --help", r)


@case
def usage_unknown_flag(ctx):
    r = ctx.run(["--bogus"], rc=1)
    expect(r.stderr.startswith("maxc: error:"), "stderr should start with 'maxc: error:'", r)
    expect_in("--bogus", r.stderr, "stderr", r)
    expect_in("maxc --help", r.stderr, "stderr", r)
    r = ctx.run(["check", ctx.example("mlp"), "--bogus"], rc=1)
    expect(r.stderr.startswith("maxc: error:"), "stderr should start with 'maxc: error:'", r)
    r = ctx.run(["trace", ctx.example("mlp"), "--emit", "xml"], rc=1)
    expect(r.stderr.startswith("maxc: error:"), "stderr should start with 'maxc: error:'", r)
    expect_in("--emit", r.stderr, "stderr", r)
    r = ctx.run(["--diagnostics", "yaml", "check", ctx.example("mlp")], rc=1)
    expect(r.stderr.startswith("maxc: error:"), "stderr should start with 'maxc: error:'", r)
    r = ctx.run(["frobnicate"], rc=1)
    expect(r.stderr.startswith("maxc: error:"), "stderr should start with 'maxc: error:'", r)


@case
def usage_missing_model(ctx):
    for sub in [["check"], ["trace"], ["run"], ["init-weights", "-o", "w.safetensors"]]:
        r = ctx.run(sub, rc=1)
        expect(r.stderr.startswith("maxc: error:"), "stderr should start with 'maxc: error:'", r)
        expect_in("model", r.stderr, "stderr", r)
    expect(listing(ctx.tmp) == [], "nothing should be written: %s" % listing(ctx.tmp))
    # No subcommand at all: usage on stderr, exit 1.
    r = ctx.run([], rc=1)
    expect_in("Usage", r.stderr, "stderr", r)
    # A model file that does not exist.
    missing = ctx.path("no-such-model.json")
    r = ctx.run(["check", missing], rc=1)
    expect_diagnostic(r, missing, "E0401")


def check_example(ctx, name):
    model = ctx.example(name)
    ctx.weights(name)
    r = ctx.run(["check", model], rc=0)
    expect(re.search(r"^%s: ok \(\d+ nodes, \d+ subgraph definitions, \d+ weights\)$" % re.escape(model),
                     r.stderr, re.M) is not None, "expected an 'ok' summary", r)
    expect("error" not in r.stderr and "warning" not in r.stderr, "no diagnostics expected", r)
    r = ctx.run(["-q", "check", model], rc=0)
    expect(r.stderr == "" and r.stdout == "", "-q check should print nothing", r)
    r = ctx.run(["--diagnostics", "json", "check", model], rc=0)
    doc = parse_json(r.stdout, "--diagnostics json", r)
    expect(doc.get("errors") == 0 and doc.get("warnings") == 0 and doc.get("diagnostics") == [],
           "expected no diagnostics", r)
    r = ctx.run(["check", model, "--no-weights"], rc=0)


@case
def check_mlp(ctx):
    check_example(ctx, "mlp")


@case
def check_cnn(ctx):
    check_example(ctx, "cnn")


@case
def check_gpt(ctx):
    check_example(ctx, "gpt")


@case
def check_malformed_json(ctx):
    path = ctx.path("bad.json")
    with open(path, "w") as f:
        f.write('{"maxc": 1, "name": "m",\n "inputs": [}\n')
    r = ctx.run(["check", path], rc=1)
    line = expect_diagnostic(r, path, "E0501", message="malformed JSON")
    expect("line 2" in line, "the diagnostic should give the line of the syntax error: %s" % line, r)
    # Not JSON at all, and an empty file.
    with open(path, "w") as f:
        f.write("model: mlp\n")
    expect_diagnostic(ctx.run(["check", path], rc=1), path, "E0501")
    with open(path, "w") as f:
        pass
    expect_diagnostic(ctx.run(["check", path], rc=1), path, "E0501")


@case
def tensor_parallel_cli(ctx):
    """--tensor-parallel on trace (the plan), run (the ranks on threads) and
    compile (one artifact per rank); bad counts, ranks and --shard values are
    clear E0002 errors that write nothing."""
    gpt = ctx.example("gpt")
    plan = ctx.run(["trace", gpt, "--tensor-parallel", "2", "--emit", "sharding"], rc=0).stdout
    expect_in("h.0.attn.qkv.weight [768,256]: column -> [384,256] per rank (3 pieces)", plan, "the plan")
    expect_in("collectives per run: 8 all_reduce, 1 all_gather", plan, "the plan")
    plan = ctx.run(["--shard", "*mlp*=replicated", "trace", gpt, "--tensor-parallel", "2", "--emit", "sharding"],
                   rc=0).stdout
    expect_in("h.0.mlp.fc.weight [1024,256]: replicated (--shard)", plan, "the plan with --shard")
    rank1 = ctx.run(["trace", gpt, "--tensor-parallel", "2", "--rank", "1"], rc=0).stdout
    expect_in("all_reduce(", rank1, "rank 1's program")
    # Runs: the reference's ranks on threads give the whole model's logits.
    tokens = ctx.path("tokens.npy")
    write_npy(tokens, [1, 128], [(i * 7) % 1024 for i in range(128)], "<i8")
    ctx.run(["run", gpt, "--input", "tokens=" + tokens, "--output-dir", ctx.path("one"), "-q"], rc=0)
    ctx.run(["run", gpt, "--input", "tokens=" + tokens, "--output-dir", ctx.path("two"), "--tensor-parallel", "2",
             "-q"], rc=0)
    one, two = read_npy(ctx.path("one", "logits.npy")), read_npy(ctx.path("two", "logits.npy"))
    expect(one[1] == two[1], "shapes %s and %s" % (one[1], two[1]))
    worst = max(abs(a - b) for a, b in zip(one[2], two[2]))
    expect(worst <= 1e-4, "2 ranks differ from the whole model by %g" % worst)
    # The GPU kernels, emulated: 2 virtual devices with their collectives between launches.
    ctx.run(["run", gpt, "--input", "tokens=" + tokens, "--output-dir", ctx.path("emu"), "--tensor-parallel", "2",
             "--device", "amdgpu-emu", "-q"], rc=0)
    emu = read_npy(ctx.path("emu", "logits.npy"))
    worst = max(abs(a - b) for a, b in zip(one[2], emu[2]))
    expect(worst <= 1e-4, "2 emulated GPU ranks differ from the whole model by %g" % worst)
    # Errors.
    before = listing(ctx.tmp)
    for args in (["trace", gpt, "--emit", "sharding"], ["trace", gpt, "--tensor-parallel", "0"],
                 ["trace", gpt, "--tensor-parallel", "2", "--rank", "2"],
                 ["run", gpt, "--tensor-parallel", "2", "--device", "cuda"],
                 ["run", ctx.example("llama"), "--tensor-parallel", "2", "--prompt", "1,2", "--generate", "2"],
                 ["compile", gpt, "--tensor-parallel", "2", "--gpu", "gfx90a", "-o", ctx.path("x.o")],
                 ["compile", gpt, "--tensor-parallel", "2", "--rank", "5", "-o", ctx.path("x.o")],
                 ["compile", gpt, "--rank", "1", "-o", ctx.path("x.o")],
                 ["--shard", "*mlp*=column", "trace", gpt, "--tensor-parallel", "2"],
                 ["--shard", "*mlp*=replicated", "trace", gpt]):
        r = ctx.run(args, rc=1)
        expect("error[E0002]" in r.stderr, "expected an E0002 diagnostic", r)
    expect(listing(ctx.tmp) == before, "nothing written: %s" % listing(ctx.tmp))


@case
def trace_canonicalize(ctx):
    # The graph the compile step `canonicalize` hands to decompose, and what it rewrote.
    path = write_json(ctx.path("pw.json"), {
        "maxc": 1, "name": "pw", "inputs": [{"name": "x", "dtype": "f32", "shape": ["batch", 8]}],
        "outputs": ["y"],
        "main": [{"s": ["pow", "x", 2.0]}, {"r": ["sqrt", "x"]}, {"y": ["div", "s", "r"]}]})
    r = ctx.run(["trace", path, "--canonicalize", "--stats"], rc=0)
    stats = stats_of(r.stdout)
    expect(stats.get("nodes") == "4" and stats.get("canonical_nodes") == "3", "4 nodes traced, 3 after", r)
    expect(stats.get("rewrite_pow_by_constant") == "1" and stats.get("rewrite_div_by_sqrt") == "1",
           "pow(x, 2) and x / sqrt(y) rewritten once each", r)
    text = ctx.run(["trace", path, "--canonicalize"], rc=0).stdout
    expect_in("mul(%0, %0)", text, "pow(x, 2) as x*x", r)
    expect("pow(" not in text and "sqrt(" not in text.replace("rsqrt(", ""), "no pow or sqrt left", r)
    # Without the flag: the graph as traced.
    expect_in("pow(", ctx.run(["trace", path], rc=0).stdout, "the traced graph keeps pow")
    # Spelled-out activations: x*sigmoid(x) and exp(a - max(a)) / sum(...) over the last axis.
    path = write_json(ctx.path("act.json"), {
        "maxc": 1, "name": "act", "inputs": [{"name": "x", "dtype": "f32", "shape": ["batch", 8]}],
        "outputs": ["y"],
        "main": [{"s": ["sigmoid", "x"]}, {"a": ["mul", "x", "s"]},
                 {"m": ["max", "a", {"axes": [-1], "keepdims": True}]}, {"d": ["sub", "a", "m"]}, {"e": ["exp", "d"]},
                 {"z": ["sum", "e", {"axes": [-1], "keepdims": True}]}, {"y": ["div", "e", "z"]}]})
    r = ctx.run(["trace", path, "--canonicalize", "--stats"], rc=0)
    stats = stats_of(r.stdout)
    expect(stats.get("rewrite_silu") == "1" and stats.get("rewrite_softmax") == "1" and
           stats.get("canonical_nodes") == "2", "x*sigmoid(x) as silu, the spelled softmax as softmax", r)
    expect_in("softmax(", ctx.run(["trace", path, "--canonicalize"], rc=0).stdout, "softmax in the canonical graph")
    # A graph with nothing to rewrite.
    stats = stats_of(ctx.run(["trace", ctx.example("mlp"), "--canonicalize", "--stats"], rc=0).stdout)
    expect(stats.get("rewrites") == "0", "the MLP has nothing to canonicalize")


@case
def check_unknown_op(ctx):
    doc = load_example_json(ctx, "mlp")
    doc["main"][1]["a1"][0] = "reluu"
    path = write_json(ctx.path("model.json"), doc)
    r = ctx.run(["check", path, "--no-weights"], rc=1)
    expect_diagnostic(r, path, "E0101", "/main/1/a1/0", message=r"unknown op 'reluu'.*did you mean 'relu'")
    # Inside a module body.
    doc = load_example_json(ctx, "mlp")
    doc["modules"]["Linear"]["body"][0]["y"][0] = "linearx"
    path = write_json(ctx.path("model.json"), doc)
    r = ctx.run(["check", path, "--no-weights"], rc=1)
    expect_diagnostic(r, path, "E0101", "/modules/Linear/body/0/y/0", message=r"unknown op 'linearx'")


@case
def check_missing_weights_file(ctx):
    doc = load_example_json(ctx, "mlp")
    doc["weights"] = "missing.safetensors"
    path = write_json(ctx.path("model.json"), doc)
    r = ctx.run(["check", path], rc=1)
    expect_diagnostic(r, path, "E0401", "/weights")
    # --no-weights does not need the file.
    ctx.run(["check", path, "--no-weights"], rc=0)
    # A missing --weights override.
    missing = ctx.path("other.safetensors")
    r = ctx.run(["check", ctx.example("mlp"), "--weights", missing], rc=1)
    expect_in("E0401", r.stderr, "stderr", r)
    expect_in(missing, r.stderr, "stderr", r)


@case
def check_truncated_weights(ctx):
    with open(ctx.weights("mlp"), "rb") as f:
        data = f.read()
    # The model names its weights relative to itself: copy it next to a
    # weights file cut short inside the data section.
    shutil.copy(ctx.example("mlp"), ctx.path("model.json"))
    with open(ctx.path("mlp.safetensors"), "wb") as f:
        f.write(data[:100000])
    model = ctx.path("model.json")
    r = ctx.run(["check", model], rc=1)
    expect_diagnostic(r, model, "E0403", "/weights", message="data_offsets")
    # The same file given with --weights: the diagnostic names that file.
    truncated = ctx.path("truncated.safetensors")
    with open(truncated, "wb") as f:
        f.write(data[:100000])
    r = ctx.run(["check", ctx.example("mlp"), "--weights", truncated], rc=1)
    expect_in("error[E0403]", r.stderr, "stderr", r)
    expect_in(truncated, r.stderr, "stderr", r)
    # Cut inside the 8-byte length and inside the JSON header.
    with open(truncated, "wb") as f:
        f.write(data[:5])
    r = ctx.run(["check", ctx.example("mlp"), "--weights", truncated], rc=1)
    expect_in("error[E0402]", r.stderr, "stderr", r)
    with open(truncated, "wb") as f:
        f.write(data[:100])
    r = ctx.run(["check", ctx.example("mlp"), "--weights", truncated], rc=1)
    expect_in("error[E0402]", r.stderr, "stderr", r)
    expect("internal" not in r.stderr, "a truncated file is an input error", r)


@case
def check_unused_weight(ctx):
    tensors, _ = read_safetensors(ctx.weights("mlp"))
    out = {name: (shape, values.tolist()) for name, (_, shape, values) in tensors.items()}
    out["extra.bias"] = ([2], [1.0, 2.0])
    weights = write_safetensors(ctx.path("extra.safetensors"), out)
    r = ctx.run(["check", ctx.example("mlp"), "--weights", weights], rc=0)
    expect(re.search(r"^%s: warning\[E0507\]: .*'extra\.bias'" % re.escape(weights), r.stderr, re.M) is not None,
           "expected an unused-weight warning", r)
    r = ctx.run(["-W", "check", ctx.example("mlp"), "--weights", weights], rc=1)
    expect_diagnostic(r, weights, "E0507", message="extra.bias")
    r = ctx.run(["-q", "check", ctx.example("mlp"), "--weights", weights], rc=0)
    expect(r.stderr == "", "-q should hide warnings", r)


@case
def diagnostics_json(ctx):
    doc = load_example_json(ctx, "mlp")
    doc["main"][1]["a1"][0] = "reluu"
    path = write_json(ctx.path("model.json"), doc)
    r = ctx.run(["--diagnostics", "json", "check", path, "--no-weights"], rc=1)
    out = parse_json(r.stdout, "--diagnostics json output", r)
    expect(isinstance(out.get("diagnostics"), list) and out.get("errors", 0) >= 1, "expected errors", r)
    matching = [d for d in out["diagnostics"] if d.get("code") == "E0101"]
    expect(len(matching) == 1, "expected one E0101 diagnostic", r)
    d = matching[0]
    expect(d == dict(d, severity="error", file=path, pointer="/main/1/a1/0"),
           "unexpected fields in %s" % json.dumps(d), r)
    expect("reluu" in d.get("message", ""), "message should name the op", r)
    expect(out["errors"] == sum(1 for x in out["diagnostics"] if x["severity"] == "error"),
           "'errors' should count the error diagnostics", r)
    expect("error[" not in r.stderr, "JSON diagnostics go to stdout, not as text to stderr", r)
    # Warnings are counted separately.
    r = ctx.run(["--diagnostics", "json", "check", ctx.example("mlp")], rc=0)
    out = parse_json(r.stdout, "--diagnostics json output", r)
    expect(out.get("errors") == 0, "expected no errors", r)


def diagnostics_locations_of(ctx, r, path):
    """The JSON diagnostics of `r` must name `path` as the file and hold a JSON pointer (or none)."""
    out = parse_json(r.stdout, "--diagnostics json output", r)
    expect(out["diagnostics"], "expected diagnostics", r)
    for d in out["diagnostics"]:
        expect(d["file"] == path, "'file' should be %r in %s" % (path, json.dumps(d)), r)
        expect(d["pointer"] == "" or d["pointer"].startswith("/"),
               "'pointer' should be empty or a JSON pointer in %s" % json.dumps(d), r)
    return out


@case
def diagnostics_file_errors(ctx):
    """Errors about a whole file read `FILE: error[...]`, with no pointer.

    Was a bug in maxc 0.1.0 (fixed): DiagnosticEngine::error(const Error &, file, "")
    uses the error's location (the file path again) as the pointer, so the
    text reads `PATH: PATH: error[E0407]` and the JSON pointer is the path."""
    out = ctx.path("no-such-dir", "out.txt")
    r = ctx.run(["trace", ctx.example("mlp"), "-o", out], rc=1)
    line = expect_diagnostic(r, out, "E0407")
    expect(not line.startswith(out + ": " + out + ":"), "the file is named twice: %s" % line, r)
    r = ctx.run(["--diagnostics", "json", "trace", ctx.example("mlp"), "-o", out], rc=1)
    diagnostics_locations_of(ctx, r, out)
    npy = ctx.path("missing.npy")
    r = ctx.run(["run", ctx.example("mlp"), "--input", "x=" + npy], rc=1)
    line = expect_diagnostic(r, npy, "E0401")
    expect(not line.startswith(npy + ": " + npy + ":"), "the file is named twice: %s" % line, r)


@case
def diagnostics_graph_json_location(ctx):
    """Errors in a graph JSON input name the file and a JSON pointer separately.

    Was a bug in maxc 0.1.0 (fixed): load_model_text (lib/Frontend/ModelTracer.cpp)
    reports an escaping Error as Diagnostic{file = "", pointer =
    e.location()}, and the location is "FILE: POINTER", so JSON diagnostics
    get "file": "" and "pointer": "FILE: /constants/0"."""
    graph = ctx.path("mlp.graph.json")
    ctx.run(["trace", ctx.example("mlp"), "--emit", "json", "-o", graph], rc=0)
    # No weights for the constants.
    r = ctx.run(["trace", graph], rc=1)
    expect_diagnostic(r, graph, "E0109", "/constants/0")
    r = ctx.run(["--diagnostics", "json", "trace", graph], rc=1)
    out = diagnostics_locations_of(ctx, r, graph)
    expect(out["diagnostics"][0]["pointer"] == "/constants/0", "expected pointer /constants/0", r)


@case
def trace_stats_gpt(ctx):
    r = ctx.run(["trace", ctx.example("gpt"), "--stats"], rc=0)
    stats = stats_of(r.stdout)
    expect(stats.get("subgraph_definitions") == "1", "expected subgraph_definitions=1", r)
    expect(stats.get("subgraph_calls") == "4", "expected subgraph_calls=4", r)
    for key in ["nodes", "subgraph_nodes", "constants", "constant_bytes", "weights_read", "inputs", "outputs",
                "trace_ms"]:
        expect(key in stats, "missing stats key %s" % key, r)
    expect(stats["inputs"] == "1" and stats["outputs"] == "1", "gpt has one input and one output", r)
    # The node count agrees with `check`'s summary.
    c = ctx.run(["check", ctx.example("gpt")], rc=0)
    expect_in("(%s nodes, 1 subgraph definitions" % stats["nodes"], c.stderr, "check's summary", c)
    # The MLP has no subgraphs.
    stats = stats_of(ctx.run(["trace", ctx.example("mlp"), "--stats"], rc=0).stdout)
    expect(stats.get("subgraph_definitions") == "0" and stats.get("subgraph_calls") == "0",
           "mlp should have no subgraphs")
    # --stats with --emit: the graph, then the stats.
    r = ctx.run(["trace", ctx.example("mlp"), "--stats", "--emit", "text"], rc=0)
    text = ctx.run(["trace", ctx.example("mlp")], rc=0).stdout
    expect(r.stdout.startswith(text), "--emit text --stats should print the graph first", r)
    stats_of(r.stdout[len(text):])


@case
def trace_dot(ctx):
    r = ctx.run(["trace", ctx.example("gpt"), "--emit", "dot"], rc=0)
    dot = r.stdout
    expect(dot.startswith('digraph "gpt" {'), "expected a digraph", r)
    expect(dot.rstrip().endswith("}"), "expected a closing brace", r)
    expect(dot.count("{") == dot.count("}"), "unbalanced braces", r)
    clusters = set(re.findall(r"subgraph (cluster_\w+) \{", dot))
    expect(len(clusters) == 1, "gpt should have one subgraph cluster", r)
    heads = re.findall(r"lhead=(cluster_\w+)", dot)
    expect(len(heads) == 4, "expected 4 call edges into the cluster", r)
    expect(set(heads) <= clusters, "call edges point at undefined clusters", r)
    # Every edge joins declared nodes.
    declared = set(re.findall(r"^\s*(\w+) \[", dot, re.M))
    for a, b in re.findall(r"^\s*(\w+) -> (\w+)", dot, re.M):
        expect(a in declared and b in declared, "edge %s -> %s uses an undeclared node" % (a, b), r)
    r = ctx.run(["trace", ctx.example("mlp"), "--emit", "dot"], rc=0)
    expect(r.stdout.startswith('digraph "mlp" {') and "cluster_" not in r.stdout, "mlp has no clusters", r)


@case
def trace_dot_labels(ctx):
    """Multi-line DOT labels use the DOT escape \\n, written once.

    Was a bug in maxc 0.1.0 (fixed): lib/IR/DotPrinter.cpp builds op-node labels with
    "\\\\n" and then escape()s them, so the DOT text holds `linear\\\\nf32[...]`,
    which Graphviz shows as a literal backslash-n; input labels (`x\\nf32`) are
    right."""
    r = ctx.run(["trace", ctx.example("mlp"), "--emit", "dot"], rc=0)
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', r.stdout)
    expect(labels, "no labels", r)
    bad = [l for l in labels if "\\\\" in l]
    expect(not bad, "labels with an escaped backslash (shown literally by Graphviz): %s" % bad[:3], r)
    expect_in('label="linear\\nf32[batch,512]"', r.stdout, "the DOT output", r)


def roundtrip(ctx, name):
    model, weights = ctx.example(name), ctx.weights(name)
    graph = ctx.path(name + ".graph.json")
    ctx.run(["trace", model, "--emit", "json", "-o", graph], rc=0)
    doc = parse_json(open(graph).read(), "trace --emit json")
    expect(doc.get("format") == "maxc-graph", "expected \"format\": \"maxc-graph\"")
    for emit in ["text", "dot", "json"]:
        original = ctx.run(["trace", model, "--emit", emit], rc=0).stdout
        again = ctx.run(["trace", graph, "--weights", weights, "--emit", emit], rc=0)
        expect(again.stdout == original,
               "tracing the graph JSON of %s gives different --emit %s output than the model" % (name, emit), again)
    # With the constants embedded no weights are needed.
    embedded = ctx.path(name + ".embedded.json")
    ctx.run(["trace", model, "--emit", "json", "--embed-constants", "-o", embedded], rc=0)
    again = ctx.run(["trace", embedded], rc=0)
    expect(again.stdout == ctx.run(["trace", model], rc=0).stdout, "embedded round trip differs", again)


@case
def trace_json_roundtrip(ctx):
    for name in EXAMPLES:
        roundtrip(ctx, name)


@case
def trace_json_no_weights(ctx):
    """`trace GRAPH.json --no-weights` traces with zero constants, like a model.

    Was a bug in maxc 0.1.0 (fixed): load_model_text (lib/Frontend/ModelTracer.cpp)
    ignores LoadOptions::synthesize_weights for graph JSON, so each constant
    without data fails with E0109 "has no data and no weights file was given"
    although --no-weights is documented as "Trace with zero tensors of the
    declared param shapes" and graph JSON declares every constant's shape."""
    graph = ctx.path("gpt.graph.json")
    ctx.run(["trace", ctx.example("gpt"), "--emit", "json", "-o", graph], rc=0)
    expected = ctx.run(["trace", ctx.example("gpt"), "--no-weights"], rc=0).stdout
    r = ctx.run(["trace", graph, "--no-weights"], rc=0)
    expect(r.stdout == expected, "tracing graph JSON --no-weights differs from the model", r)


@case
def trace_output_file(ctx):
    model = ctx.example("mlp")
    expected = ctx.run(["trace", model], rc=0).stdout
    out = ctx.path("out", "graph.txt")
    os.mkdir(ctx.path("out"))
    r = ctx.run(["trace", model, "-o", out], rc=0)
    expect(r.stdout == "", "-o should leave stdout empty", r)
    expect(open(out).read() == expected, "-o wrote different text than stdout")
    expect(listing(ctx.path("out")) == ["graph.txt"], "temporary files left: %s" % listing(ctx.path("out")))
    # Overwriting replaces the whole file.
    with open(out, "w") as f:
        f.write("x" * 100000)
    ctx.run(["trace", model, "-o", out], rc=0)
    expect(open(out).read() == expected, "-o did not replace the old contents")
    # "-" is stdout.
    r = ctx.run(["trace", model, "-o", "-"], rc=0)
    expect(r.stdout == expected, "-o - should print to stdout", r)
    # Into a directory that does not exist: exit 1, nothing written.
    bad = ctx.path("missing", "graph.txt")
    r = ctx.run(["trace", model, "-o", bad], rc=1)
    expect_in("E0407", r.stderr, "stderr", r)
    expect(not os.path.exists(ctx.path("missing")), "-o created the missing directory")
    # Onto an existing directory: exit 1, no temporary file left beside it.
    r = ctx.run(["trace", model, "-o", ctx.path("out")], rc=1)
    expect_in("E0407", r.stderr, "stderr", r)
    expect(listing(ctx.tmp) == ["out"], "files left behind: %s" % listing(ctx.tmp), r)
    # A model error: the old output stays as it was.
    with open(out, "w") as f:
        f.write("old")
    bad_model = ctx.path("bad.json")
    with open(bad_model, "w") as f:
        f.write("{")
    r = ctx.run(["trace", bad_model, "-o", out], rc=1)
    expect(open(out).read() == "old", "a failed trace changed the -o file", r)
    os.remove(bad_model)
    expect(listing(ctx.path("out")) == ["graph.txt"], "temporary files left: %s" % listing(ctx.path("out")))


def mlp_input(batch):
    # Deterministic values of both signs.
    return [((i * 37) % 101) / 50.0 - 1.0 for i in range(batch * 784)]


def linear(x, weight, bias, n_in, n_out):
    out = []
    for j in range(n_out):
        row = weight[j * n_in:(j + 1) * n_in]
        out.append(sum(map(operator.mul, row, x)) + bias[j])
    return out


def mlp_reference(weights_path, x, batch):
    tensors, _ = read_safetensors(weights_path)
    w = {name: values for name, (_, _, values) in tensors.items()}
    dims = [(784, 512), (512, 512), (512, 10)]
    out = []
    for b in range(batch):
        h = x[b * 784:(b + 1) * 784]
        for i, (n_in, n_out) in enumerate(dims):
            expect(tensors["fc%d.weight" % (i + 1)][1] == [n_out, n_in], "unexpected fc%d.weight shape" % (i + 1))
            h = linear(h, w["fc%d.weight" % (i + 1)], w["fc%d.bias" % (i + 1)], n_in, n_out)
            if i < 2:
                h = [max(v, 0.0) for v in h]
        out.extend(h)
    return out


def compare(actual, expected, rtol=1e-4):
    expect(len(actual) == len(expected), "%d values, expected %d" % (len(actual), len(expected)))
    scale = max(abs(v) for v in expected)
    expect(scale > 0, "the reference output is all zeros: the test input is too weak")
    for i, (a, e) in enumerate(zip(actual, expected)):
        # Relative error, with values near zero judged against the output's scale.
        if abs(a - e) > rtol * max(abs(e), 0.01 * scale):
            raise Failure("output[%d] = %r, expected %r (relative tolerance %g)" % (i, a, e, rtol))


@case
def run_mlp(ctx):
    batch = 3
    x = mlp_input(batch)
    write_npy(ctx.path("x.npy"), [batch, 784], x)
    r = ctx.run(["run", ctx.example("mlp"), "--input", "x=x.npy", "--output-dir", "out"], rc=0)
    expect_in("logits: f32[3,10] -> out/logits.npy", r.stdout, "stdout", r)
    expect(listing(ctx.path("out")) == ["logits.npy"], "expected only logits.npy: %s" % listing(ctx.path("out")))
    descr, shape, values = read_npy(ctx.path("out", "logits.npy"))
    expect(descr == "<f4" and shape == (batch, 10), "logits.npy is %s %s, expected <f4 (3, 10)" % (descr, shape))
    compare(values, mlp_reference(ctx.weights("mlp"), x, batch))
    # The same from the graph JSON form, bit for bit.
    graph = ctx.path("mlp.graph.json")
    ctx.run(["trace", ctx.example("mlp"), "--emit", "json", "--embed-constants", "-o", graph], rc=0)
    ctx.run(["-q", "run", graph, "--input", "x=x.npy", "--output-dir", "out2"], rc=0)
    expect(open(ctx.path("out2", "logits.npy"), "rb").read() == open(ctx.path("out", "logits.npy"), "rb").read(),
           "running the graph JSON gives different logits")


@case
def run_wrong_shape(ctx):
    model = ctx.example("mlp")
    for name, shape, descr in [("short.npy", [2, 783], "<f4"), ("rank1.npy", [784], "<f4"),
                               ("f64.npy", [2, 784], "<f8")]:
        count = 1
        for d in shape:
            count *= d
        write_npy(ctx.path(name), shape, [0.5] * count, descr)
        r = ctx.run(["run", model, "--input", "x=" + name, "--output-dir", "out"], rc=1)
        line = expect_diagnostic(r, model, "E0301", message="'x'")
        expect("784" in line, "the diagnostic should give the expected shape: %s" % line, r)
        expect(not os.path.exists(ctx.path("out", "logits.npy")), "no output expected", r)
    # Not a .npy file.
    with open(ctx.path("junk.npy"), "w") as f:
        f.write("not numpy")
    r = ctx.run(["run", model, "--input", "x=junk.npy"], rc=1)
    expect_in("E0406", r.stderr, "stderr", r)


@case
def run_missing_input(ctx):
    model = ctx.example("mlp")
    r = ctx.run(["run", model, "--output-dir", "out"], rc=1)
    line = expect_diagnostic(r, model, "E0301", message="'x'")
    expect_in("--input x=", line, "the diagnostic", r)
    expect(not os.path.exists(ctx.path("out", "logits.npy")), "no output expected", r)
    write_npy(ctx.path("x.npy"), [1, 784], mlp_input(1))
    # An input the model does not have.
    r = ctx.run(["run", model, "--input", "x=x.npy", "--input", "y=x.npy"], rc=1)
    expect_in("'y'", r.stderr, "stderr", r)
    # Malformed --input and --dim.
    r = ctx.run(["run", model, "--input", "x.npy"], rc=1)
    expect_in("NAME=FILE.npy", r.stderr, "stderr", r)
    r = ctx.run(["run", model, "--input", "x=x.npy", "--dim", "batch=two"], rc=1)
    expect_in("NAME=N", r.stderr, "stderr", r)
    expect(listing(ctx.tmp) == ["x.npy"], "nothing should be written: %s" % listing(ctx.tmp))


@case
def run_generate_errors(ctx):
    """`maxc run --generate`: a working run on the Llama example, and a clear
    error (exit 1, nothing written) for every argument or model that does
    not fit."""
    llama, gpt, mlp = ctx.example("llama"), ctx.example("gpt"), ctx.example("mlp")
    ctx.weights("llama")
    r = ctx.run(["run", llama, "--prompt", "5,6", "--generate", "3"], rc=0)
    tokens = r.stdout.split()
    expect(len(tokens) == 3 and all(t.isdigit() for t in tokens), "expected 3 tokens on stdout: %r" % r.stdout, r)
    expect_in("prefill: 2 tokens", r.stderr, "stderr", r)
    r = ctx.run(["-q", "run", llama, "--prompt", "5,6", "--generate", "3"], rc=0)
    expect(r.stdout.split() == tokens and r.stderr == "", "-q: the tokens only", r)
    # The same prompt from an .npy file of the tokens input.
    write_npy(ctx.path("prompt.npy"), [1, 2], [5, 6], "<i8")
    r = ctx.run(["-q", "run", llama, "--input", "tokens=prompt.npy", "--generate", "3"], rc=0)
    expect(r.stdout.split() == tokens, "--input tokens=prompt.npy generated %r, --prompt %r" % (r.stdout, tokens), r)
    for args, message in [
            (["--prompt", "1,2"], "need --generate"),
            (["--max-context", "9"], "need --generate"),
            (["--generate", "0", "--prompt", "1"], "token count >= 1"),
            (["--generate", "-2", "--prompt", "1"], "token count >= 1"),
            (["--generate", "2", "--prompt", "1,x"], "token ids"),
            (["--generate", "2", "--prompt", "1,"], "token ids"),
            (["--generate", "2", "--prompt", "-3"], "token ids"),
            (["--generate", "2"], "--prompt"),
            (["--generate", "2", "--prompt", "1", "--input", "tokens=prompt.npy"], "not both"),
            (["--generate", "2", "--prompt", "1", "--max-context", "-1"], "row count"),
            (["--generate", "2", "--prompt", "1", "--output-dir", "out"], "writes no files"),
    ]:
        r = ctx.run(["run", llama] + args, rc=1)
        expect_in(message, r.stderr, "stderr for %s" % " ".join(args), r)
        expect(r.stdout == "", "no tokens expected for %s" % " ".join(args), r)
    r = ctx.run(["run", llama, "--generate", "5", "--prompt", "1,2,3", "--max-context", "6"], rc=1)
    expect_diagnostic(r, llama, "E0002", message="--max-context 6 has no room .*7 rows")
    r = ctx.run(["run", llama, "--generate", "5", "--prompt", "1,2,3", "--max-context", "100000000",
                 "--max-memory", "1M"], rc=1)
    expect_diagnostic(r, llama, "E0408", message="--max-memory")
    # A model without state whose sequence is static cannot grow it.
    r = ctx.run(["run", gpt, "--generate", "2", "--prompt", "1,2"], rc=1)
    expect_diagnostic(r, gpt, "E0002", message="one row of tokens along its sequence dim .batch.*128 is not")
    # Float inputs are no tokens.
    r = ctx.run(["run", mlp, "--generate", "2", "--prompt", "1,2"], rc=1)
    expect_diagnostic(r, mlp, "E0002", message="not integers")
    expect(listing(ctx.tmp) == ["prompt.npy"], "nothing should be written: %s" % listing(ctx.tmp))


@case
def init_weights_determinism(ctx):
    model = ctx.example("mlp")
    a, b, c = ctx.path("a.safetensors"), ctx.path("b.safetensors"), ctx.path("c.safetensors")
    ctx.run(["init-weights", model, "-o", a, "--seed", "7"], rc=0)
    ctx.run(["init-weights", model, "-o", b, "--seed", "7"], rc=0)
    ctx.run(["init-weights", model, "-o", c, "--seed", "8"], rc=0)
    da, db, dc = (open(p, "rb").read() for p in (a, b, c))
    expect(da == db, "two runs with --seed 7 differ")
    expect(da != dc, "--seed 7 and --seed 8 give the same file")
    ta, meta = read_safetensors(a)
    tc, _ = read_safetensors(c)
    expect(meta.get("seed") == "7", "metadata should record the seed: %s" % meta)
    expect(sorted(ta) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "fc3.bias", "fc3.weight"],
           "unexpected tensors %s" % sorted(ta))
    expect(ta["fc1.weight"][1] == [512, 784], "fc1.weight should be [512, 784]")
    for name in ta:
        expect(ta[name][2] != tc[name][2], "%s does not depend on the seed" % name)
    # The weights fit the model.
    ctx.run(["check", model, "--weights", a], rc=0)
    # Default seed is deterministic too; a bad output path fails cleanly.
    ctx.run(["-q", "init-weights", model, "-o", ctx.path("d0.safetensors")], rc=0)
    ctx.run(["-q", "init-weights", model, "-o", ctx.path("d1.safetensors")], rc=0)
    expect(open(ctx.path("d0.safetensors"), "rb").read() == open(ctx.path("d1.safetensors"), "rb").read(),
           "two runs with the default seed differ")
    r = ctx.run(["init-weights", model, "-o", ctx.path("missing", "w.safetensors")], rc=1)
    expect_in("E0407", r.stderr, "stderr", r)


@case
def trace_determinism(ctx):
    for name in EXAMPLES:
        ctx.weights(name)
        for emit in ["text", "json", "dot"]:
            first = ctx.run(["trace", ctx.example(name), "--emit", emit], rc=0).stdout
            second = ctx.run(["trace", ctx.example(name), "--emit", emit], rc=0).stdout
            expect(first == second, "two runs of trace --emit %s on %s differ" % (emit, name))
        s1 = stats_of(ctx.run(["trace", ctx.example(name), "--stats"], rc=0).stdout)
        s2 = stats_of(ctx.run(["trace", ctx.example(name), "--stats"], rc=0).stdout)
        s1.pop("trace_ms"), s2.pop("trace_ms")
        expect(s1 == s2, "two runs of trace --stats on %s differ: %s vs %s" % (name, s1, s2))


@case
def ops(ctx):
    r = ctx.run(["ops"], rc=0)
    names = [l.split()[0] for l in r.stdout.splitlines() if l and not l.startswith(" ")]
    r = ctx.run(["ops", "--json"], rc=0)
    doc = parse_json(r.stdout, "ops --json", r)
    expect(isinstance(doc, list) and [op["name"] for op in doc] == names, "text and JSON op lists differ", r)
    # Every op the examples use is listed.
    for name in EXAMPLES:
        doc = load_example_json(ctx, name)
        bodies = [doc["main"]] + [m.get("body", []) for m in doc.get("modules", {}).values()]
        for body in bodies:
            for statement in body:
                for value in statement.values():
                    op = value[0]
                    expect(op in ("call", "repeat") or op in names, "op %s (used by %s) is not listed" % (op, name), r)
    for op in ["linear", "relu", "conv2d", "max_pool2d", "layer_norm", "softmax", "embedding", "matmul"]:
        expect(op in names, "op %s is not listed" % op, r)


# ---------------------------------------------------------------------------
# SARIF diagnostics, targets, inspect, diff, test/bench harnesses


def sarif_uri(path):
    """The artifactLocation.uri maxc writes for `path` (file:// when absolute)."""
    import urllib.parse
    quoted = urllib.parse.quote(path, safe="/-._~")
    return "file://" + quoted if path.startswith("/") else quoted


def sarif_run(r):
    doc = parse_json(r.stdout, "--diagnostics sarif output", r)
    expect(doc.get("version") == "2.1.0", "SARIF version should be 2.1.0", r)
    expect(isinstance(doc.get("runs"), list) and len(doc["runs"]) == 1, "expected exactly one run", r)
    run = doc["runs"][0]
    driver = run.get("tool", {}).get("driver", {})
    expect(driver.get("name") == "maxc", "tool.driver.name should be maxc", r)
    rules = driver.get("rules")
    expect(isinstance(rules, list) and rules, "tool.driver.rules should list the codes", r)
    for rule in rules:
        expect(re.match(r"^E\d{4}$", rule.get("id", "")) is not None, "rule id %r is not a code" % rule.get("id"), r)
        expect(rule.get("shortDescription", {}).get("text"), "rule %s has no shortDescription" % rule["id"], r)
    ids = [rule["id"] for rule in rules]
    expect(len(ids) == len(set(ids)), "rule ids repeat", r)
    for result in run.get("results", []):
        expect(result.get("ruleId") in ids, "result rule %r is not among the rules" % result.get("ruleId"), r)
        if "ruleIndex" in result:
            expect(rules[result["ruleIndex"]]["id"] == result["ruleId"], "ruleIndex does not match ruleId", r)
        expect(result.get("level") in ("error", "warning", "note"), "bad level in %s" % json.dumps(result), r)
        expect(result.get("message", {}).get("text"), "result without message.text", r)
    return driver, run


@case
def diagnostics_sarif(ctx):
    doc = load_example_json(ctx, "mlp")
    doc["main"][1]["a1"][0] = "reluu"
    doc["main"][2]["h2"][2] = "nope"
    path = write_json(ctx.path("model.json"), doc)
    r = ctx.run(["--diagnostics", "sarif", "check", path, "--no-weights"], rc=1)
    driver, run = sarif_run(r)
    expect(driver.get("version") == project_version(ctx.source_dir), "driver.version should be maxc's", r)
    ids = [rule["id"] for rule in driver["rules"]]
    for code in ["E0001", "E0101", "E0503", "E0507"]:
        expect(code in ids, "rule %s missing (every documented code should be a rule)" % code, r)
    by_rule = {res["ruleId"]: res for res in run["results"]}
    for code, pointer, text in [("E0101", "/main/1/a1/0", "reluu"), ("E0503", "/main/2/h2/2", "nope")]:
        expect(code in by_rule, "expected a %s result" % code, r)
        res = by_rule[code]
        expect(res["level"] == "error", "%s should be an error" % code, r)
        expect(text in res["message"]["text"], "%s message should name %r" % (code, text), r)
        loc = res["locations"][0]
        expect(loc["physicalLocation"]["artifactLocation"]["uri"] == sarif_uri(path),
               "uri should be %r: %s" % (sarif_uri(path), json.dumps(loc)), r)
        expect([l.get("fullyQualifiedName") for l in loc.get("logicalLocations", [])] == [pointer],
               "logicalLocations should hold the pointer %s: %s" % (pointer, json.dumps(loc)), r)
    expect("error[" not in r.stderr, "SARIF goes to stdout, not as text to stderr", r)
    # A warning is a warning-level result; a clean run has no results.
    tensors, _ = read_safetensors(ctx.weights("mlp"))
    out = {name: (shape, values.tolist()) for name, (_, shape, values) in tensors.items()}
    out["extra.bias"] = ([2], [1.0, 2.0])
    weights = write_safetensors(ctx.path("extra.safetensors"), out)
    r = ctx.run(["--diagnostics", "sarif", "check", ctx.example("mlp"), "--weights", weights], rc=0)
    _, run = sarif_run(r)
    expect([(x["ruleId"], x["level"]) for x in run["results"]] == [("E0507", "warning")],
           "expected one E0507 warning", r)
    r = ctx.run(["--diagnostics", "sarif", "check", ctx.example("mlp")], rc=0)
    _, run = sarif_run(r)
    expect(run["results"] == [], "a clean check has no results", r)
    # A relative path stays a relative URI reference.
    shutil.copy(path, ctx.path("my model.json"))
    r = ctx.run(["--diagnostics", "sarif", "check", "my model.json", "--no-weights"], rc=1)
    _, run = sarif_run(r)
    uris = {res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for res in run["results"]}
    expect(uris == {"my%20model.json"}, "expected the relative, percent-encoded uri: %s" % uris, r)


@case
def targets(ctx):
    r = ctx.run(["targets"], rc=0)
    out = r.stdout
    for word in ["x86_64-linux-gnu", "aarch64-linux-gnu", "znver4", "skylake-avx512", "x86-64-v3", "neoverse-v2"]:
        expect(re.search(r"(^|\s)%s(\s|$)" % re.escape(word), out, re.M) is not None, "%s not listed" % word, r)
    heading = "amdgpu (maxc compile --gpu"
    expect_in(heading, out, "targets", r)
    expect("planned" not in out and "not yet supported" not in out, "the GPU backend works: no 'planned' text", r)
    gpu_part = out[out.index(heading):]
    for chip, alias in [("gfx90a", "mi250x"), ("gfx942", "mi300x"), ("gfx1100", "rx7900xtx")]:
        expect(chip in gpu_part and alias in gpu_part, "%s (%s) should be under the amdgpu heading" % (chip, alias), r)
    expect_in("amdgpu-emu", out, "targets lists every registered backend", r)
    expect(re.search(r"^cuda: .*\n(  .*\n)*  nvptx64-nvidia-cuda  sm_90 ", out, re.M) is not None,
           "cuda and its sm targets listed", r)
    r = ctx.run(["targets", "--json"], rc=0)
    doc = parse_json(r.stdout, "targets --json", r)
    arches = {c["arch"]: c for c in doc["cpu"]}
    expect(set(arches) == {"x86_64", "aarch64"}, "expected x86_64 and aarch64: %s" % sorted(arches), r)
    expect("znver4" in arches["x86_64"]["cpus"] and "x86_64-linux-gnu" in arches["x86_64"]["triples"],
           "x86_64 should list znver4 and x86_64-linux-gnu", r)
    expect("cortex-a72" in arches["aarch64"]["cpus"], "aarch64 should list cortex-a72", r)
    expect(doc["gpu"]["supported"] is True, "gpu should say supported: true", r)
    aliases = {t["chip"]: t["aliases"] for t in doc["gpu"]["targets"]}
    expect(aliases == {"gfx90a": ["mi250x"], "gfx942": ["mi300x"], "gfx1100": ["rx7900xtx"]},
           "unexpected gpu targets %s" % aliases, r)
    expect([b["name"] for b in doc["backends"]] == ["cpu", "amdgpu", "amdgpu-emu", "cuda"],
           "backends come from the registry: %s" % [b["name"] for b in doc["backends"]], r)
    cuda = [b for b in doc["backends"] if b["name"] == "cuda"][0]
    expect({"sm_80", "sm_90"} <= {t["arch"] for t in cuda["targets"]}, "cuda targets: %s" % cuda["targets"], r)
    # A listed NVIDIA GPU is one compile accepts (backend "cuda").
    ctx.run(["-q", "compile", ctx.example("mlp"), "--gpu", "sm_80", "--emit", "header", "-o",
             ctx.path("mlp_cuda.o")], rc=0)
    expect("_cuda_error(" in open(ctx.path("mlp.h")).read(), "--gpu sm_80 writes the CUDA header", r)
    # A listed GPU is one compile accepts.
    ctx.run(["-q", "compile", ctx.example("mlp"), "--gpu", "mi300x", "--emit", "header", "-o",
             ctx.path("mlp_gpu.o")], rc=0)
    # A listed CPU is one compile accepts.
    ctx.run(["-q", "compile", ctx.example("mlp"), "--cpu", "znver4", "-O0", "--emit", "header", "-o",
             ctx.path("mlp.o")], rc=0)
    # The new subcommands and exit code 3 are in --help.
    r = ctx.run(["--help"], rc=0)
    for sub in ["targets", "inspect", "diff"]:
        expect(re.search(r"^\s+%s\s" % sub, r.stdout, re.M) is not None, "subcommand %s not listed" % sub, r)
    expect(re.search(r"^\s+3\s+\S", r.stdout, re.M) is not None, "exit code 3 not explained", r)


def compile_mlp(ctx, directory, model=None, extra=()):
    """Compiles the MLP (or `model`, with the MLP's weights) into DIRECTORY/mlp.o; returns the manifest path."""
    os.makedirs(ctx.path(directory), exist_ok=True)
    args = ["-q", "compile", model or ctx.example("mlp"), "--weights", ctx.weights("mlp"),
            "-o", ctx.path(directory, "mlp.o")] + list(extra)
    ctx.run(args, rc=0)
    return ctx.path(directory, "mlp.manifest.json")


@case
def inspect_artifacts(ctx):
    manifest = compile_mlp(ctx, "out", extra=["--cpu", "x86-64-v3"])
    header, obj = ctx.path("out", "mlp.h"), ctx.path("out", "mlp.o")
    prototype = "int32_t mlp_run(const float *x, float *logits, int64_t batch, void *workspace)"
    # Manifest.
    r = ctx.run(["inspect", manifest], rc=0)
    for text in ["mlp_run", "f32[batch,784]", "f32[batch,10]", "x86-64-v3", prototype, "mlp_workspace_size"]:
        expect_in(text, r.stdout, "inspect manifest", r)
    m = parse_json(ctx.run(["inspect", manifest, "--json"], rc=0).stdout, "inspect manifest --json")
    expect(m["kind"] == "manifest" and m["name"] == "mlp", "kind/name: %s %s" % (m.get("kind"), m.get("name")))
    expect(m["inputs"][0]["shape"] == ["batch", 784] and m["dims"] == ["batch"], "manifest inputs/dims")
    expect(m["run_prototype"] == prototype, "manifest run_prototype: %r" % m["run_prototype"])
    expect("mlp_run" in m["entry_points"] and m["weights_bytes"] > 2000000, "manifest entry points/weights")
    # Header.
    r = ctx.run(["inspect", header], rc=0)
    for text in ["mlp_run", prototype, "f32[batch,784]", "mlp_status_string"]:
        expect_in(text, r.stdout, "inspect header", r)
    h = parse_json(ctx.run(["inspect", header, "--json"], rc=0).stdout, "inspect header --json")
    expect(h["kind"] == "header" and h["name"] == "mlp", "header kind/name")
    for key in ["inputs", "outputs", "dims", "run_prototype"]:
        expect(h[key] == m[key], "header and manifest disagree on %s: %s vs %s" % (key, h[key], m[key]))
    # Object.
    r = ctx.run(["inspect", obj], rc=0)
    for text in ["mlp_run", "mlp_run_packed", "mlp_workspace_size", "mlp_status_string", "x86_64", ".text",
                 ".rodata"]:
        expect_in(text, r.stdout, "inspect object", r)
    o = parse_json(ctx.run(["inspect", obj, "--json"], rc=0).stdout, "inspect object --json")
    expect(o["kind"] == "object" and o["arch"] == "x86_64", "object kind/arch")
    expect([x["name"] for x in o["models"]] == ["mlp"], "object models: %s" % o["models"])
    expect(o["models"][0]["entry_points"] == ["mlp_run", "mlp_run_packed", "mlp_workspace_size", "mlp_status_string",
                                             "mlp_set_parallel_for", "mlp_set_num_threads"],
           "object entry points: %s" % o["models"][0]["entry_points"])
    expect(o["sizes"]["text"] > 0 and o["sizes"]["rodata"] >= m["weights_bytes"] * 0.99,
           "object sizes: %s (weights %d)" % (o["sizes"], m["weights_bytes"]))
    expect(o["models"][0].get("manifest", {}).get("lists_this_object") is True,
           "the manifest next to the object lists it: %s" % o["models"][0])
    # Not artifacts: exit 1 with a clear error.
    garbage = ctx.path("garbage.bin")
    with open(garbage, "wb") as f:
        f.write(b"\x00\x01garbage" * 100)
    r = ctx.run(["inspect", garbage], rc=1)
    expect_diagnostic(r, garbage, "E0002", message="not a maxc artifact")
    with open(ctx.path("bad.o"), "wb") as f:
        f.write(b"\x7fELF" + b"\x00" * 20)
    expect_diagnostic(ctx.run(["inspect", ctx.path("bad.o")], rc=1), ctx.path("bad.o"), "E0002")
    other = write_json(ctx.path("other.json"), {"maxc": 1})
    expect_diagnostic(ctx.run(["inspect", other], rc=1), other, "E0502", message="not a maxc manifest")
    expect_diagnostic(ctx.run(["inspect", ctx.example("mlp")], rc=1), ctx.example("mlp"), "E0502")
    expect_diagnostic(ctx.run(["inspect", ctx.path("missing.o")], rc=1), ctx.path("missing.o"), "E0401")
    r = ctx.run(["--diagnostics", "json", "inspect", garbage], rc=1)
    out = parse_json(r.stdout, "--diagnostics json inspect", r)
    expect(out["errors"] == 1 and out["diagnostics"][0]["code"] == "E0002", "expected one E0002", r)


@case
def diff_manifests(ctx):
    a = compile_mlp(ctx, "a")
    # The same model with its input renamed: a breaking change.
    doc = load_example_json(ctx, "mlp")
    doc["inputs"][0]["name"] = "input"
    doc["main"][0]["h1"][2] = "input"
    b = compile_mlp(ctx, "b", model=write_json(ctx.path("renamed.json"), doc))
    # A static batch: shapes and dims change.
    doc = load_example_json(ctx, "mlp")
    doc["inputs"][0]["shape"] = [4, 784]
    s = compile_mlp(ctx, "s", model=write_json(ctx.path("static.json"), doc))
    # Another CPU and -O: the interface stays.
    c = compile_mlp(ctx, "c", extra=["--cpu", "x86-64", "-O1"])

    r = ctx.run(["diff", a, a], rc=0)
    expect_in("unchanged", r.stdout, "diff A A", r)
    r = ctx.run(["diff", a, b], rc=3)
    expect_in("breaking", r.stdout, "diff", r)
    expect(re.search(r"input 'x' renamed to 'input'", r.stdout) is not None, "the rename should be reported", r)
    d = parse_json(ctx.run(["diff", a, b, "--json"], rc=3).stdout, "diff --json")
    expect(d["interface_changed"] is True, "interface_changed should be true")
    expect([(x["kind"], x["before"], x["after"]) for x in d["breaking"]] == [("input_renamed", "x", "input")],
           "breaking: %s" % d["breaking"])
    r = ctx.run(["diff", a, s], rc=3)
    d = parse_json(ctx.run(["diff", a, s, "--json"], rc=3).stdout, "diff --json")
    kinds = {x["kind"] for x in d["breaking"]}
    expect({"input_shape", "output_shape", "dims"} <= kinds, "static batch: %s" % kinds, r)
    expect(any("symbolic" in x["message"] and "static" in x["message"] for x in d["breaking"]),
           "symbolic -> static should be named: %s" % d["breaking"], r)
    r = ctx.run(["diff", a, c], rc=0)
    d = parse_json(ctx.run(["diff", a, c, "--json"], rc=0).stdout, "diff --json")
    expect(d["interface_changed"] is False and d["breaking"] == [], "another CPU is not breaking: %s" % d)
    kinds = {x["kind"] for x in d["non_breaking"]}
    expect({"target_cpu", "opt_level"} <= kinds, "cpu/opt-level notes expected: %s" % kinds)
    # Input problems: exit 1.
    expect_diagnostic(ctx.run(["diff", a, ctx.path("missing.json")], rc=1), ctx.path("missing.json"), "E0401")
    expect_diagnostic(ctx.run(["diff", a, ctx.path("a", "mlp.o")], rc=1), ctx.path("a", "mlp.o"), "E0501")
    expect_diagnostic(ctx.run(["diff", ctx.example("mlp"), a], rc=1), ctx.example("mlp"), "E0502")


def c_compiler():
    for cc in [os.environ.get("CC"), "cc", "gcc", "clang"]:
        if cc and shutil.which(cc):
            return cc
    raise Failure("no C compiler (cc, gcc or clang) to build the harnesses with")


def run_program(cmd, cwd, rc=None):
    try:
        r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    except subprocess.TimeoutExpired:
        raise Failure("timed out: %s" % " ".join(cmd))
    r.cmd = cmd
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    if rc is not None and r.returncode != rc:
        raise Failure("expected exit %d, got %d\n%s" % (rc, r.returncode, describe(r)))
    return r


@case
def compile_harness(ctx):
    emit = "obj,header,test-harness,bench-harness"
    r = ctx.run(["compile", ctx.example("mlp"), "-o", "mlp.o", "--emit", emit, "--print-outputs"], rc=0)
    expect(r.stdout.split() == ["mlp.o", "mlp.h", "mlp_test.c", "mlp_bench.c"], "--print-outputs", r)
    ctx.run(["-q", "compile", ctx.example("mlp"), "-o", "mlp.o", "--emit", emit], rc=0)
    expect(listing(ctx.tmp) == ["mlp.h", "mlp.o", "mlp_bench.c", "mlp_test.c"], "files: %s" % listing(ctx.tmp))
    cc = c_compiler()
    for prog in ["mlp_test", "mlp_bench"]:
        r = run_program([cc, "-O2", "-Wall", "-Wextra", prog + ".c", "mlp.o", "-lm", "-o", prog], ctx.tmp, rc=0)
        expect("warning:" not in r.stderr, "%s.c should compile without warnings" % prog, r)
    # Inputs and the reference interpreter's outputs as .npy.
    write_npy(ctx.path("x.npy"), [3, 784], mlp_input(3))
    ctx.run(["run", ctx.example("mlp"), "--device", "reference", "--input", "x=x.npy", "--output-dir", "ref"], rc=0)
    r = run_program(["./mlp_test", "x.npy", "ref/logits.npy"], ctx.tmp, rc=0)
    expect(re.search(r"^PASS\b", r.stdout, re.M) is not None, "the test harness should PASS", r)
    expect_in("max abs error", r.stdout, "test harness output", r)
    # Wrong expectations fail; a bad input is a usage problem (2).
    _, shape, values = read_npy(ctx.path("ref", "logits.npy"))
    write_npy(ctx.path("wrong.npy"), list(shape), [v * 1.01 + 0.1 for v in values])
    r = run_program(["./mlp_test", "x.npy", "wrong.npy"], ctx.tmp, rc=1)
    expect(re.search(r"^FAIL\b", r.stdout, re.M) is not None, "the test harness should FAIL", r)
    run_program(["./mlp_test", "x.npy", "wrong.npy", "--rtol", "0.5", "--atol", "0.5"], ctx.tmp, rc=0)
    write_npy(ctx.path("short.npy"), [3, 783], [0.5] * (3 * 783))
    r = run_program(["./mlp_test", "short.npy", "ref/logits.npy"], ctx.tmp, rc=2)
    expect_in("784", r.stderr, "stderr", r)
    write_npy(ctx.path("f64.npy"), [3, 784], [0.5] * (3 * 784), "<f8")
    r = run_program(["./mlp_test", "f64.npy", "ref/logits.npy"], ctx.tmp, rc=2)
    expect_in("<f4", r.stderr, "stderr", r)
    run_program(["./mlp_test", "x.npy"], ctx.tmp, rc=2)
    # The benchmark.
    r = run_program(["./mlp_bench", "-n", "5"], ctx.tmp, rc=0)
    m = re.search(r"p50 ([0-9.]+)\s+p90 ([0-9.]+)\s+p99 ([0-9.]+)", r.stdout)
    expect(m is not None, "the bench harness should print p50/p90/p99", r)
    p50, p90, p99 = (float(x) for x in m.groups())
    expect(0 < p50 <= p90 <= p99, "percentiles out of order: %s" % (m.groups(),), r)
    expect(re.search(r"[0-9.]+ runs/s", r.stdout) is not None, "the bench harness should print runs/s", r)
    r = run_program(["./mlp_bench", "-n", "3", "--warmup", "1", "--dim", "batch=4", "--threads", "2"], ctx.tmp, rc=0)
    expect_in("batch=4", r.stdout, "bench output", r)
    expect_in("2 thread(s)", r.stdout, "bench output", r)
    # Several thread counts, alternated in one process over rounds.
    r = run_program(["./mlp_bench", "-n", "3", "--warmup", "1", "--threads", "1,2", "--rounds", "2"], ctx.tmp, rc=0)
    expect(len(re.findall(r"latency ms: p50", r.stdout)) == 2, "one latency line per thread count", r)
    expect_in("1 thread(s), 2 rounds", r.stdout, "bench output", r)
    expect(re.search(r"p50 ratio: 2 thread\(s\) / 1 thread\(s\) = [0-9.]+", r.stdout) is not None,
           "the bench harness should print the p50 ratio", r)
    for bad in ["1,,2", "0", "1,2,3,4,5,6,7,8,9", "x"]:
        r = run_program(["./mlp_bench", "--threads", bad], ctx.tmp, rc=2)
        expect_in("--threads", r.stderr, "bench --threads " + bad, r)
    run_program(["./mlp_bench", "--rounds", "0"], ctx.tmp, rc=2)
    run_program(["./mlp_bench", "--dim", "seq=4"], ctx.tmp, rc=2)
    run_program(["./mlp_bench", "-n", "0"], ctx.tmp, rc=2)
    # --input: the values of a .npy file, whose shape must be the input's for the dims.
    r = run_program(["./mlp_bench", "-n", "2", "--dim", "batch=3", "--input", "x=x.npy"], ctx.tmp, rc=0)
    expect_in("batch=3", r.stdout, "bench output", r)
    r = run_program(["./mlp_bench", "-n", "2", "--input", "x=x.npy"], ctx.tmp, rc=2)  # batch 1, file batch 3
    expect_in("x.npy: shape", r.stderr, "stderr", r)
    r = run_program(["./mlp_bench", "--dim", "batch=3", "--input", "x=f64.npy"], ctx.tmp, rc=2)
    expect_in("<f4", r.stderr, "stderr", r)
    r = run_program(["./mlp_bench", "--input", "y=x.npy"], ctx.tmp, rc=2)
    expect_in("one of the model's inputs: x", r.stderr, "stderr", r)


def snapshot(directory):
    """{name: (bytes, mtime_ns)} of every file in DIRECTORY."""
    out = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out[name] = (f.read(), os.stat(path).st_mtime_ns)
    return out


@case
def compile_keeps_previous_outputs(ctx):
    """A failing compile (bad -MF directory, a directory where the header goes,
    an unwritable directory) leaves the previous good outputs as they were and
    no temp files behind."""
    out = ctx.path("out")
    compile_mlp(ctx, "out")
    before = snapshot(out)
    expect(sorted(before) == ["mlp.h", "mlp.manifest.json", "mlp.o"], "first compile wrote %s" % sorted(before))
    args = ["compile", ctx.example("mlp"), "--weights", ctx.weights("mlp"), "-o", os.path.join(out, "mlp.o"),
            "--cpu", "x86-64"]  # another CPU: the new object would differ
    r = ctx.run(args + ["-MF", ctx.path("missing", "mlp.d")], rc=1)
    expect_in("E0407", r.stderr, "a bad -MF directory", r)
    expect(snapshot(out) == before, "a failed compile changed the previous outputs: %s" % listing(out), r)
    # The header path is a directory: nothing changes, nothing is deleted.
    other = ctx.path("other")
    os.makedirs(os.path.join(other, "mlp.h"))
    compile_mlp(ctx, "other", extra=["--emit", "obj,manifest"])
    before_other = snapshot(other)
    r = ctx.run(["compile", ctx.example("mlp"), "--weights", ctx.weights("mlp"), "-o",
                 os.path.join(other, "mlp.o"), "--cpu", "x86-64"], rc=1)
    expect_in("is a directory", r.stderr, "a directory where the header goes", r)
    expect(snapshot(other) == before_other and os.path.isdir(os.path.join(other, "mlp.h")),
           "a failed compile changed %s" % listing(other), r)
    # A read-only directory (root ignores permissions: checked as a user only).
    if os.geteuid() != 0:
        os.chmod(out, 0o555)
        try:
            r = ctx.run(args, rc=1)
            expect_in("E0407", r.stderr, "a read-only directory", r)
            expect(snapshot(out) == before, "a read-only directory's files changed", r)
        finally:
            os.chmod(out, 0o755)
    # A good compile replaces them all.
    ctx.run(args + ["-q"], rc=0)
    after = snapshot(out)
    expect(sorted(after) == sorted(before) and after["mlp.o"][0] != before["mlp.o"][0],
           "the good compile should replace the object: %s" % listing(out))


@case
def compile_refuses_to_overwrite_inputs(ctx):
    """-o naming the model, the weights or another output of the same command
    is refused (by device and inode, so another spelling or a hard link is
    caught too); -o "" is an error; init-weights -o MODEL is refused."""
    model = ctx.path("model.json")
    shutil.copy(ctx.example("mlp"), model)
    weights = ctx.path("w.safetensors")
    shutil.copy(ctx.weights("mlp"), weights)
    original = snapshot(ctx.tmp)
    base = ["compile", model, "--weights", weights]
    for target in [model, "./model.json", weights, ctx.path(".", "w.safetensors")]:
        r = ctx.run(base + ["-o", target, "--emit", "obj"], rc=1)
        expect_in("would overwrite the input", r.stderr, "-o %s" % target, r)
    os.link(model, ctx.path("alias.o"))
    r = ctx.run(base + ["-o", "alias.o", "--emit", "obj"], rc=1)
    expect_in("would overwrite the input", r.stderr, "a hard link to the model", r)
    os.unlink(ctx.path("alias.o"))
    # The object and the header would be the same file.
    r = ctx.run(base + ["-o", "mlp.h"], rc=1)
    expect_in("are the same file", r.stderr, "-o mlp.h", r)
    r = ctx.run(base + ["-o", "mlp.o", "-MF", "mlp.h"], rc=1)
    expect_in("are the same file", r.stderr, "-MF mlp.h", r)
    r = ctx.run(base + ["-o", ""], rc=1)
    expect_in("output path is empty", r.stderr, '-o ""', r)
    r = ctx.run(["init-weights", model, "-o", model], rc=1)
    expect_in("would overwrite the input", r.stderr, "init-weights -o MODEL", r)
    expect(snapshot(ctx.tmp) == original, "a refused command changed files: %s" % listing(ctx.tmp))
    # A character device is written through, never replaced.
    ctx.run(base + ["-q", "-o", "/dev/null", "--emit", "obj"], rc=0)
    expect(os.path.exists("/dev/null") and not os.path.isfile("/dev/null"), "/dev/null was replaced")
    # A symlinked output: the file it points to is replaced, the link stays.
    os.makedirs(ctx.path("real"))
    os.symlink(ctx.path("real", "target.o"), ctx.path("link.o"))
    with open(ctx.path("real", "target.o"), "w") as f:
        f.write("old")
    ctx.run(base + ["-q", "-o", "link.o", "--emit", "obj"], rc=0)
    expect(os.path.islink(ctx.path("link.o")), "the symlink was replaced by a file")
    with open(ctx.path("real", "target.o"), "rb") as f:
        expect(f.read(4) == b"\x7fELF", "the symlink's target should hold the new object")


@case
def compile_flags_on_every_backend(ctx):
    """Every compile flag works with --gpu too, or is refused with a clear
    error: never silently ignored."""
    model = ctx.path("my model.json")  # a space, for the depfile
    shutil.copy(ctx.example("mlp"), model)
    gpu = ["compile", model, "--weights", ctx.weights("mlp"), "--gpu", "gfx942", "--cpu", "x86-64"]
    r = ctx.run(gpu + ["--weights-mode", "external"], rc=1)
    expect_in("--weights-mode external is not supported with --gpu yet", r.stderr, "stderr", r)
    r = ctx.run(gpu + ["--threads", "4"], rc=1)
    expect_in("--threads", r.stderr, "stderr", r)
    r = ctx.run(gpu + ["--emit", "obj,asm"], rc=1)
    expect_in("unknown artifact 'asm' with the amdgpu backend", r.stderr, "stderr", r)
    r = ctx.run(["compile", model, "--weights", ctx.weights("mlp"), "--code-object-version", "5"], rc=1)
    expect_in("--code-object-version applies to --gpu only", r.stderr, "stderr", r)
    r = ctx.run(gpu + ["-o", "g.o", "--emit", "obj,header,hsaco", "--print-outputs"], rc=0)
    expect(r.stdout.split() == ["g.o", "mlp.h", "mlp.gfx942.hsaco"], "--print-outputs with --gpu", r)
    expect(listing(ctx.tmp) == ["my model.json"], "--print-outputs wrote files: %s" % listing(ctx.tmp), r)
    r = ctx.run(gpu + ["-o", "g.o", "--time-passes", "--verify-reproducible", "--manifest-timings", "-MD", "-j", "2"],
                rc=0)
    for step in ["load", "canonicalize", "decompose", "plan", "backend", "verify-reproducible", "artifacts", "write",
                 "hsaco gfx942", "arches", "total"]:
        expect(re.search(r"^\s+%s\s+[0-9.]+ ms" % re.escape(step), r.stderr, re.M) is not None,
               "--time-passes should time %r" % step, r)
    manifest = parse_json(open(ctx.path("mlp.manifest.json")).read(), "the GPU manifest")
    expect("backend" in manifest.get("compile_time_ms", {}), "--manifest-timings with --gpu: %s" % manifest.keys())
    with open(ctx.path("g.o.d")) as f:
        dep = f.read()
    expect("my\\ model.json" in dep, "the depfile should escape the space: %r" % dep)



@case
def compile_jobs_values(ctx):
    """--jobs N / -j N takes a number of threads from 1 to 1024; anything else
    is refused with E0002 before anything is read or written."""
    model = ctx.example("mlp")
    base = ["compile", model, "--weights", ctx.weights("mlp"), "-o", "m.o"]
    for flag, value, backend in [("--jobs", "0", []), ("--jobs", "abc", []), ("-j", "-3", []), ("--jobs", "2x", []),
                                 ("-j", "1025", []), ("--jobs", "", []), ("-j", "0", ["--gpu", "gfx942"])]:
        r = ctx.run(base + backend + [flag, value], rc=1)
        expect_in("error[E0002]", r.stderr, "%s %r" % (flag, value), r)
        expect_in("--jobs", r.stderr, "%s %r" % (flag, value), r)
    expect(listing(ctx.tmp) == [], "a refused --jobs wrote files: %s" % listing(ctx.tmp))
    r = ctx.run(["compile", "--help"], rc=0)
    expect_in("-j,--jobs", r.stdout, "compile --help", r)
    ctx.run(base + ["-q", "-j", "1"], rc=0)



def manifest_validator(ctx):
    sys.path.insert(0, os.path.join(ctx.source_dir, "test", "schema"))
    import validate_examples  # noqa: E402  (the standard-library JSON Schema subset validator)
    with open(os.path.join(ctx.source_dir, "docs", "manifest.schema.json")) as f:
        return validate_examples.Validator(json.load(f))


@case
def manifest_schema(ctx):
    """Every backend's manifest matches docs/manifest.schema.json (one schema,
    manifest_version 2); inspect and diff read the CPU and GPU ones alike."""
    validator = manifest_validator(ctx)
    cpu = compile_mlp(ctx, "cpu", extra=["--cpu", "x86-64"])
    ext = compile_mlp(ctx, "ext", extra=["--cpu", "x86-64", "--weights-mode", "external", "--manifest-timings"])
    gpu = compile_mlp(ctx, "gpu", extra=["--cpu", "x86-64", "--gpu", "gfx90a,gfx942"])
    gpu1 = compile_mlp(ctx, "gpu1", extra=["--cpu", "x86-64", "--gpu", "gfx942"])
    docs = {}
    for path in [cpu, ext, gpu, gpu1]:
        doc = parse_json(open(path).read(), path)
        errors = validator.errors(doc)
        expect(not errors, "%s does not match docs/manifest.schema.json: %s" % (path, errors))
        expect(doc["manifest_version"] == 2, "manifest_version: %s" % doc["manifest_version"])
        docs[path] = doc
    expect(docs[cpu]["backend"] == "cpu" and docs[gpu]["backend"] == "amdgpu", "backends")
    # The MLP has no softmax or norm: the CPU and GPU plans agree.
    expect(docs[cpu]["kernels"] == docs[gpu]["kernels"], "the same kernels listed for both backends (no row kernels in the MLP)")
    expect(docs[gpu]["interface"]["status_codes"]["6"] == "no device", "the GPU status codes come from one table")
    # A broken manifest is caught by the schema (it can fail).
    bad = dict(docs[gpu], backend="tpu")
    expect(validator.errors(bad), "the schema should reject backend 'tpu'")
    # inspect on the GPU manifest, header and object.
    r = ctx.run(["inspect", gpu], rc=0)
    for text in ["AMD GPU gfx90a gfx942", "mlp_init", "mlp_context *ctx", "-lamdhip64", "code object: gfx942"]:
        expect_in(text, r.stdout, "inspect GPU manifest", r)
    m = parse_json(ctx.run(["inspect", gpu, "--json"], rc=0).stdout, "inspect --json")
    expect(m["backend"] == "amdgpu" and [g["arch"] for g in m["gpu"]] == ["gfx90a", "gfx942"], "inspect --json gpu")
    h = parse_json(ctx.run(["inspect", ctx.path("gpu", "mlp.h"), "--json"], rc=0).stdout, "inspect header --json")
    expect(h["backend"] == "amdgpu" and h["run_prototype"] == m["run_prototype"],
           "GPU header and manifest agree: %s vs %s" % (h["run_prototype"], m["run_prototype"]))
    expect("mlp_init" in h["entry_points"], "GPU header entry points: %s" % h["entry_points"])
    o = parse_json(ctx.run(["inspect", ctx.path("gpu", "mlp.o"), "--json"], rc=0).stdout, "inspect object --json")
    expect(o["models"][0]["backend"] == "amdgpu" and o["models"][0]["manifest"]["lists_this_object"] is True,
           "GPU object: %s" % o["models"][0])
    # diff: GPU vs GPU (an arch dropped is breaking), CPU vs GPU (another backend).
    r = ctx.run(["diff", gpu, gpu], rc=0)
    expect_in("unchanged", r.stdout, "diff GPU GPU", r)
    d = parse_json(ctx.run(["diff", gpu, gpu1, "--json"], rc=3).stdout, "diff --json")
    expect([(x["kind"], x["subject"]) for x in d["breaking"]] == [("gpu_arch_removed", "gfx90a")],
           "dropping gfx90a: %s" % d["breaking"])
    d = parse_json(ctx.run(["diff", gpu1, gpu, "--json"], rc=0).stdout, "diff --json")
    expect(any(x["kind"] == "gpu_arch_added" for x in d["non_breaking"]), "adding gfx90a: %s" % d["non_breaking"])
    d = parse_json(ctx.run(["diff", cpu, gpu, "--json"], rc=3).stdout, "diff --json")
    expect(any(x["kind"] == "backend" for x in d["breaking"]), "cpu -> amdgpu is breaking: %s" % d["breaking"])


ADVERSARIAL_NAMES = ["int", "NULL", "x", "X", "workspace", "batch", "errno", "ctx", "stream", "class", "_Reserved",
                     "int64_t", "x_2", "stdin", "h.0", "h-0", "a__b", "b_", "template", "I", "EOF", "INT64_MAX"]


def adversarial_model(ctx):
    """A model whose inputs, outputs and dims are named like C/C++ keywords,
    libc macros, maxc's own parameters, each other (x, X) and each other's dims."""
    dims = ["int", "workspace", "stdin", "batch", "X"]
    inputs = [{"name": n, "dtype": "f32", "shape": [dims[i % len(dims)], 4]} for i, n in enumerate(ADVERSARIAL_NAMES)]
    outputs = ["stdout", "X_2", "delete", "assert", "main", "NULL_v"]
    main = [{out: ["add", ADVERSARIAL_NAMES[i], ADVERSARIAL_NAMES[i]]} for i, out in enumerate(outputs)]
    doc = {"maxc": 1, "name": "adv", "inputs": inputs, "outputs": outputs, "main": main}
    return write_json(ctx.path("adv.json"), doc)


HEADER_USER = """#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include "%s"
int main(void) { return 0; }
"""


@case
def generated_headers_compile(ctx):
    """Every generated header (CPU and GPU) compiles with -std=c89 -pedantic
    -Werror after the C library's headers, and as C++, whatever the model's
    names; the manifest keeps the model's own names."""
    model = adversarial_model(ctx)
    ctx.run(["-q", "compile", model, "-o", ctx.path("adv.o")], rc=0)
    os.makedirs(ctx.path("gpu"))
    ctx.run(["-q", "compile", model, "-o", ctx.path("gpu", "adv.o"), "--gpu", "gfx942", "--emit", "header,manifest"],
            rc=0)
    os.makedirs(ctx.path("ext"))
    ctx.run(["-q", "compile", model, "-o", ctx.path("ext", "adv.o"), "--weights-mode", "external"], rc=0)
    os.makedirs(ctx.path("mlp"))
    ctx.run(["-q", "compile", ctx.example("mlp"), "--weights", ctx.weights("mlp"), "-o", ctx.path("mlp", "mlp.o"),
             "--emit", "header"], rc=0)
    cc = c_compiler()
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    for header in [ctx.path("adv.h"), ctx.path("gpu", "adv.h"), ctx.path("ext", "adv.h"), ctx.path("mlp", "mlp.h")]:
        with open(ctx.path("use.c"), "w") as f:
            f.write(HEADER_USER % header)
        run_program([cc, "-std=c89", "-pedantic", "-Werror", "-Wall", "-Wextra", "-c", "use.c", "-o", "use.o"],
                    ctx.tmp, rc=0)
        if cxx:
            shutil.copy(ctx.path("use.c"), ctx.path("use.cpp"))
            run_program([cxx, "-std=c++17", "-pedantic", "-Werror", "-Wall", "-Wextra", "-c", "use.cpp", "-o",
                         "use.o"], ctx.tmp, rc=0)
    doc = parse_json(open(ctx.path("adv.manifest.json")).read(), "manifest")
    names = [t["name"] for t in doc["interface"]["inputs"]]
    expect(len(set(n.upper() for n in names)) == len(names), "C names must differ case-insensitively: %s" % names)
    expect(all(re.match(r"^[A-Za-z][A-Za-z0-9_]*$", n) and "__" not in n and not n.endswith("_") for n in names),
           "C names: %s" % names)
    sources = [t.get("model_name", t["name"]) for t in doc["interface"]["inputs"]]
    expect(sources == ADVERSARIAL_NAMES, "the manifest keeps the model's names: %s" % sources)
    expect(set(doc["interface"]["dims"]) == {"int", "workspace", "stdin", "batch", "X"}, "dims keep their names")
    params = doc["interface"]["dim_params"]
    expect(not set(params) & set(names), "dim parameters must not collide with inputs: %s %s" % (params, names))
    # Deterministic.
    with open(ctx.path("adv.h")) as f:
        first = f.read()
    ctx.run(["-q", "compile", model, "-o", ctx.path("adv.o")], rc=0)
    with open(ctx.path("adv.h")) as f:
        expect(f.read() == first, "the mangled header differs between two compiles")


WORKSPACE_PROGRAM = r"""
#include "ws.h"
#include <stdio.h>
#include <stdint.h>
static float x[4 * 4], y[4 * 4], s[4 * 4];
int main(void) {
  int64_t big = (int64_t)1 << 31, huge = INT64_MAX;
  int bad = 0;
  int64_t cases[][2] = {{big, big}, {huge, 1}, {-1, 1}, {(int64_t)1 << 41, 1}, {(int64_t)1 << 40, (int64_t)1 << 40}};
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    int64_t size = ws_workspace_size(cases[i][0], cases[i][1]);
    int32_t status = ws_run(x, y, s, cases[i][0], cases[i][1], NULL);
    printf("a=%lld b=%lld: workspace_size %lld, run %d\n", (long long)cases[i][0], (long long)cases[i][1],
           (long long)size, (int)status);
    if (size != -1 || status != WS_ERROR_INVALID_DIM) bad = 1;
  }
  if (ws_workspace_size(4, 4) <= 0 || ws_run(x, y, s, 4, 4, NULL) != WS_OK) bad = 1;
  return bad;
}
"""


@case
def workspace_size_rejects_what_run_rejects(ctx):
    """NAME_workspace_size returns -1 exactly where NAME_run reports
    INVALID_DIM: negative or huge dims, and dims whose workspace size
    overflows int64 (2^31 x 2^31 for a*b terms)."""
    doc = {"maxc": 1, "name": "ws",
           "inputs": [{"name": "x", "dtype": "f32", "shape": ["a", 4]}, {"name": "y", "dtype": "f32", "shape": [4, "b"]}],
           "outputs": ["s"], "main": [{"z": ["matmul", "x", "y"]}, {"s": ["softmax", "z", {"axis": -1}]}]}
    model = write_json(ctx.path("ws.json"), doc)
    ctx.run(["-q", "compile", model, "-o", ctx.path("ws.o")], rc=0)
    with open(ctx.path("ws.h")) as f:
        expect_in("-1 for dims", f.read(), "the header documents the error value")
    with open(ctx.path("main.c"), "w") as f:
        f.write(WORKSPACE_PROGRAM)
    run_program([c_compiler(), "-std=c99", "-Wall", "main.c", "ws.o", "-lm", "-o", "main"], ctx.tmp, rc=0)
    r = run_program([ctx.path("main")], ctx.tmp)
    expect(r.returncode == 0, "workspace_size and run disagree", r)


@case
def dim_pin_in_statement_shapes(ctx):
    """--dim pins an input dim of a JSON model everywhere the model names it:
    the GPT's reshapes to [batch, 128, 4, 64] follow the pin (they were
    E0104: "cannot reshape [2,128,256] into [batch,128,4,64]")."""
    model = ctx.example("gpt")
    r = ctx.run(["check", model, "--dim", "batch=2"], rc=0)
    expect_in("ok (", r.stdout + r.stderr, "check with batch pinned", r)


@case
def profile_mlp(ctx):
    """maxc profile: one row per kernel, most time first, naming the model
    nodes each computes (the MLP's statements: fc1.y, a1, ...); --json has
    the documented keys (docs/profiling.md)."""
    model = ctx.example("mlp")
    args = ["profile", model, "--dim", "batch=2", "--runs", "2", "--warmup", "1"]
    r = ctx.run(args + ["--top", "2"], rc=0)
    expect(re.search(r"^\s*rank\s+ms/run\s+share\s+calls\s+threads\s+kernel\s+graph\s+nodes$", r.stdout, re.M),
           "the table's header line", r)
    rows = [l.split() for l in r.stdout.splitlines() if re.match(r"^\s*\d+\s+[0-9.]+\s+[0-9.]+%", l)]
    expect([int(row[0]) for row in rows] == [1, 2], "--top 2: ranks 1 and 2", r)
    expect(float(rows[0][1]) >= float(rows[1][1]), "rows should be sorted by time", r)
    expect_in("1 more kernels", r.stdout, "--top 2 of 3", r)
    for name in ["fc1.y", "fc2.y", "a1", "a2"]: # the two big kernels: GEMM, bias and relu
        expect(re.search(r"(^|[ ,])%s(,|$| )" % re.escape(name), r.stdout, re.M), "node %s not named" % name, r)
    r = ctx.run(args + ["--json"], rc=0)
    doc = parse_json(r.stdout, "profile --json", r)
    for key in ["model", "name", "threads", "runs", "warmup", "run_ms", "kernel_ms", "kernels_run", "kernels"]:
        expect(key in doc, "profile --json: no '%s'" % key, r)
    expect(doc["runs"] == 2 and doc["threads"] == 1 and doc["name"] == "mlp", "runs, threads, name", r)
    kernels = doc["kernels"]
    expect(len(kernels) == doc["kernels_run"] and kernels, "every kernel that ran is listed", r)
    for k in kernels:
        for key in ["rank", "index", "kernel", "op", "ops", "graph", "ms", "share", "calls", "threads", "nodes"]:
            expect(key in k, "kernel without '%s': %s" % (key, k), r)
        expect(k["calls"] == 1 and k["threads"] == 1 and k["graph"] == "main", "one call, one thread: %s" % k, r)
    expect(abs(sum(k["share"] for k in kernels) - 1) < 1e-6, "shares should sum to 1", r)
    names = {n for k in kernels for n in k["nodes"]}
    expect({"fc1.y", "a1", "fc2.y", "a2", "fc3.y"} <= names, "node names: %s" % sorted(names), r)
    # Bad counts and an unbound dim are usage errors.
    expect_in("--runs", ctx.run(["profile", model, "--dim", "batch=2", "--runs", "0"], rc=1).stderr, "--runs 0")
    expect_diagnostic(ctx.run(["profile", model], rc=1), model, "E0108", message="--dim batch=")


@case
def compile_profile(ctx):
    """maxc compile --profile: NAME_profile_report / NAME_profile_reset in the
    header and the object; the report is the table of maxc profile, tab-separated."""
    model = ctx.example("mlp")
    ctx.run(["-q", "compile", model, "-o", "mlp.o", "--profile"], rc=0)
    header = open(ctx.path("mlp.h")).read()
    expect_in("void mlp_profile_report(FILE *file);", header, "mlp.h")
    expect_in("void mlp_profile_reset(void);", header, "mlp.h")
    manifest = json.load(open(ctx.path("mlp.manifest.json")))
    expect("mlp_profile_report" in json.dumps(manifest), "the manifest lists mlp_profile_report")
    with open(ctx.path("main.c"), "w") as f:
        f.write(PROFILE_PROGRAM)
    run_program([c_compiler(), "-std=c99", "-Wall", "main.c", "mlp.o", "-lm", "-lpthread", "-o", "main"], ctx.tmp, rc=0)
    r = run_program([ctx.path("main")], ctx.tmp, rc=0)
    expect(re.search(r"^# maxc profile of mlp: 3 run\(s\)", r.stdout, re.M), "the report's first line", r)
    rows = [l.split("\t") for l in r.stdout.splitlines() if not l.startswith("#")]
    expect(len(rows) >= 3 and all(len(row) == 8 for row in rows), "8 tab-separated fields per kernel", r)
    expect(all(row[3] == "1" and row[4] == "1" for row in rows), "one call and one thread per run", r)
    expect(any("fc1.y" in row[7] for row in rows), "the report names the nodes", r)
    r = ctx.run(["compile", model, "-o", "gpu.o", "--gpu", "gfx90a", "--profile"], rc=1)
    expect_in("--profile", r.stderr, "stderr", r)


PROFILE_PROGRAM = r"""
#include "mlp.h"
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  float *x = calloc(2 * 784, sizeof(float)), *y = calloc(2 * 10, sizeof(float));
  for (int i = 0; i < 4; ++i) {
    if (i == 1)
      mlp_profile_reset(); /* the first run is warmup */
    if (mlp_run(x, y, 2, NULL) != MLP_OK)
      return 1;
  }
  mlp_profile_report(stdout);
  free(x);
  free(y);
  return 0;
}
"""


@case
def harness_templates_are_c(ctx):
    """The harnesses' C lives in lib/Codegen/templates/*.c (embedded at build
    time): every template's text is in the generated harnesses, which compile
    as C99 with -pedantic -Wall -Wextra -Werror; the prelude compiles alone."""
    templates = os.path.join(ctx.source_dir, "lib", "Codegen", "templates")
    names = sorted(f for f in os.listdir(templates) if f.endswith(".c"))
    expect(len(names) >= 7, "expected the harness templates in %s: %s" % (templates, names))
    cc = c_compiler()
    generated = ""
    for model in ["mlp", "gpt"]:
        ctx.run(["-q", "compile", ctx.example(model), "--weights", ctx.weights(model), "-o", ctx.path(model + ".o"),
                 "--emit", "test-harness,bench-harness"], rc=0)
        for prog in [model + "_test.c", model + "_bench.c"]:
            run_program([cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-c", prog, "-o", "x.o"],
                        ctx.tmp, rc=0)
            with open(ctx.path(prog)) as f:
                generated += f.read()
    for name in names:
        with open(os.path.join(templates, name)) as f:
            text = f.read()
        start = text.index('R"maxc(")\n#endif\n') + len('R"maxc(")\n#endif\n')
        end = text.index('#ifdef MAXC_EMBED\n")maxc"')
        # main() templates have /*@KEY@*/ where model-specific statements go.
        for part in re.split(r"/\*@[A-Z_]+@\*/", text[start:end]):
            expect(part.strip("\n") in generated, "%s is not what the harnesses contain" % name)
    run_program([cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                 os.path.join(templates, "harness_prelude.c")], ctx.tmp, rc=0)


# ---------------------------------------------------------------------------
# Hardening (issue #14): bad input never crashes, hangs or allocates blindly.


def tiny_model(main, modules=None, inputs=None, outputs=("y",), **extra):
    doc = {"maxc": 1, "name": "t",
           "inputs": inputs or [{"name": "x", "dtype": "f32", "shape": [4]}],
           "outputs": list(outputs), "modules": modules or {}, "main": main}
    doc.update(extra)
    return doc


def expect_no_crash(r):
    expect(r.returncode == 1, "bad input is exit 1 (not a crash or an internal error)", r)
    expect("internal error" not in r.stderr, "no internal error", r)


@case
def harden_deep_json(ctx):
    # 200k-deep nesting used to overflow the stack while copying JSON.
    for depth in (65, 200000):
        text = json.dumps(tiny_model([{"y": ["relu", "x"]}]))
        text = text.replace('"main"', '"zzz": %s, "main"' % ("[" * depth + "]" * depth), 1)
        model = ctx.path("deep.json")
        with open(model, "w") as f:
            f.write(text)
        r = ctx.run(["check", model])
        expect_no_crash(r)
        expect_diagnostic(r, model, "E0510", "/zzz" + "/0" * 63, message="deeper than 64")
    # 64 levels are fine (it fails later, for the unknown field, not the depth).
    text = json.dumps(tiny_model([{"y": ["relu", "x"]}])).replace(
        '"main"', '"zzz": %s, "main"' % ("[" * 63 + "]" * 63), 1)
    with open(model, "w") as f:
        f.write(text)
    r = ctx.run(["check", model], rc=1)
    expect("E0510" not in r.stderr, "63 nested arrays under the root are within the limit", r)
    # Graph JSON goes through the same check.
    graph = ctx.path("deep.graph.json")
    with open(graph, "w") as f:
        f.write('{"format": "maxc-graph", "version": 1, "x": %s}' % ("[" * 100000 + "]" * 100000))
    expect_no_crash(ctx.run(["check", graph]))


@case
def harden_duplicate_keys(ctx):
    model = ctx.path("dup.json")
    with open(model, "w") as f:
        f.write('{"maxc": 1, "name": "t", "inputs": [{"name": "x", "dtype": "f32", "shape": [4], "dtype": "i64"}],'
                ' "outputs": ["y"], "main": [{"y": ["relu", "x"]}], "name": "u"}')
    r = ctx.run(["check", model], rc=1)
    expect_diagnostic(r, model, "E0511", "/inputs/0/dtype", message="duplicate key 'dtype'")
    expect_diagnostic(r, model, "E0511", "/name", message="duplicate key 'name'")


@case
def harden_module_chain(ctx):
    # 5000 nested module calls used to overflow the tracer's stack.
    n = 5000
    modules = {"M%d" % i: {"args": ["a"], "return": "b",
                           "body": [{"b": ["call", "M%d" % (i + 1), "a"] if i + 1 < n else ["relu", "a"]}]}
               for i in range(n)}
    model = write_json(ctx.path("chain.json"), tiny_model([{"y": ["call", "M0", "x"]}], modules))
    r = ctx.run(["check", model])
    expect_no_crash(r)
    expect_diagnostic(r, model, "E0509", "/modules/M255/body/0", message="5000 levels deep.*limit of 256")
    # 256 levels are fine.
    modules = {"M%d" % i: {"args": ["a"], "return": "b",
                           "body": [{"b": ["call", "M%d" % (i + 1), "a"] if i + 1 < 256 else ["relu", "a"]}]}
               for i in range(256)}
    model = write_json(ctx.path("chain256.json"), tiny_model([{"y": ["call", "M0", "x"]}], modules))
    ctx.run(["check", model], rc=0)

    # Nested repeats multiply: refused before tracing, not after 2M statements.
    inner = {"args": ["a"], "body": [{"b": ["relu", "a"]}], "return": "b"}
    outer = {"args": ["a"], "body": [{"b": ["repeat", "R", "a", {"times": 100, "prefix": "q{i}"}]}], "return": "b"}
    model = write_json(ctx.path("bomb.json"), tiny_model(
        [{"y": ["repeat", "Outer", "x", {"times": 100000, "prefix": "o{i}"}]}], {"R": inner, "Outer": outer}))
    r = ctx.run(["check", model], rc=1)
    expect_diagnostic(r, model, "E0502", "/main/0", message="more than 2000000 statements \\(at least 10100001")


@case
def harden_deep_safetensors_metadata(ctx):
    # A __metadata__ value nested 100k deep used to crash the JSON printer.
    header = ('{"__metadata__": {"k": %s}}' % ("[" * 100000 + "]" * 100000)).encode()
    weights = ctx.path("deep.safetensors")
    with open(weights, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    r = ctx.run(["check", ctx.example("mlp"), "--weights", weights])
    expect_no_crash(r)
    expect_diagnostic(r, weights, "E0402", message="deeper than 64")


@case
def harden_special_files(ctx):
    """FIFOs, directories and devices as inputs: a clear error, never a hang."""
    fifo = ctx.path("fifo")
    os.mkfifo(fifo)
    os.mkdir(ctx.path("dir"))
    write_npy(ctx.path("x.npy"), [4], [1, 2, 3, 4])
    model = write_json(ctx.path("m.json"), tiny_model([{"y": ["relu", "x"]}]))
    for path, kind in ((fifo, r"FIFO \(named pipe\)"), (ctx.path("dir"), "directory"),
                       ("/dev/null", "character device")):
        for args in (["check", path], ["check", ctx.example("mlp"), "--weights", path],
                     ["run", model, "--input", "x=" + path]):
            r = ctx.run(args, rc=1)
            expect_diagnostic(r, path, "E0401", message=kind + ", not a regular file")
    r = ctx.run(["trace", ctx.path("dir")], rc=1)
    expect("malformed JSON" not in r.stderr, "a directory is not reported as malformed JSON", r)


@case
def harden_memory_budget(ctx):
    model = write_json(ctx.path("m.json"), tiny_model([{"y": ["iota", {"shape": ["n"], "dtype": "f32"}]}]))
    write_npy(ctx.path("x.npy"), [4], [1, 2, 3, 4])
    base = ["run", model, "--input", "x=x.npy"]
    # 4e11 bytes: over the default budget (physical memory) on any test machine.
    r = ctx.run(base + ["--dim", "n=100000000000"])
    expect_no_crash(r)
    expect_diagnostic(r, model, "E0408", message=r"f32\[100000000000\], needs 400000000000 bytes")
    r = ctx.run(base + ["--dim", "n=1000", "--max-memory", "1K"], rc=1)
    expect_diagnostic(r, model, "E0408", message="needs 4000 bytes, more than the memory budget of 1024 bytes")
    ctx.run(base + ["--dim", "n=100", "--max-memory", "1M", "--output-dir", "out"], rc=0)
    r = ctx.run(base + ["--dim", "n=100", "--max-memory", "lots"], rc=1)
    expect_in("--max-memory", r.stderr, "stderr", r)
    # --dim naming a symbol the model does not have.
    r = ctx.run(base + ["--dim", "n=4", "--dim", "m=3"], rc=1)
    expect_in("--dim: error[E0002]: model 't' has no symbolic dim named 'm' (its dims: n)", r.stderr, "stderr", r)


@case
def compile_dim_pins(ctx):
    """--dim NAME=N pins a JSON model's symbolic input dim at compile time; an unknown NAME is an error."""
    r = ctx.run(["compile", ctx.example("mlp"), "--weights", ctx.weights("mlp"), "--dim", "batch=3",
                 "-o", "mlp.o", "--emit", "header"], rc=0)
    header = open(ctx.path("mlp.h")).read()
    expect_in("int32_t mlp_run(const float *x, float *logits, void *workspace);", header, "mlp.h", r)
    expect_in("f32[3,784]", header, "mlp.h", r)
    r = ctx.run(["compile", ctx.example("mlp"), "--weights", ctx.weights("mlp"), "--dim", "batch=3", "--dim", "seq=2",
                 "-o", "bad.o"], rc=1)
    expect_in("--dim: error[E0002]: " + ctx.example("mlp") + " has no symbolic input dim named 'seq' (its dims: batch)",
              r.stderr, "stderr", r)
    expect(not os.path.exists(ctx.path("bad.o")), "no object after a refused --dim", r)


@case
def harden_byte_size_rule(ctx):
    """Tensors over 2^62 bytes are rejected by check (with a location), like run."""
    iota = write_json(ctx.path("iota.json"), tiny_model(
        [{"y": ["iota", {"shape": [2 ** 31, 2 ** 31], "dtype": "i64"}]}]))
    big_input = write_json(ctx.path("input.json"), tiny_model(
        [{"y": ["relu", "x"]}], inputs=[{"name": "x", "dtype": "f32", "shape": [2 ** 62, 4]}]))
    symbolic = write_json(ctx.path("sym.json"), tiny_model(
        [{"y": ["iota", {"shape": ["n", 2 ** 40, 2 ** 40], "dtype": "f32"}]}]))
    for cmd in ("check", "trace", "compile"):
        r = ctx.run([cmd, iota], rc=1)
        expect_diagnostic(r, iota, "E0107", "/main/0/y", message=r"i64\[2147483648,2147483648\].*2\^62")
        r = ctx.run([cmd, big_input], rc=1)
        expect_diagnostic(r, big_input, "E0107", "/inputs/0/shape", message="input 'x'")
        r = ctx.run([cmd, symbolic], rc=1)
        expect_diagnostic(r, symbolic, "E0107", "/main/0/y", message="symbolic dims 1")
    # Graph JSON: the same rule, located at the node.
    small = write_json(ctx.path("small.json"), tiny_model([{"y": ["iota", {"shape": [2, 4], "dtype": "i64"}]}]))
    doc = parse_json(ctx.run(["trace", small, "--emit", "json"], rc=0).stdout, "graph JSON")
    doc["nodes"][0]["results"][0]["type"] = "i64[%d,4]" % 2 ** 62
    doc["nodes"][0]["attrs"]["shape"]["shape"] = [2 ** 62, 4]
    graph = write_json(ctx.path("big.graph.json"), doc)
    r = ctx.run(["check", graph], rc=1)
    expect_diagnostic(r, graph, "E0107", "/nodes/0", message="iota")


@case
def harden_gather_out_of_range(ctx):
    """Out-of-range indices: negatives wrap once, the rest clamp, on every device."""
    model = write_json(ctx.path("m.json"), tiny_model(
        [{"y": ["embedding", "table", "ids"]}, {"z": ["gather", "table", "ids", {"axis": 0}]}],
        inputs=[{"name": "table", "dtype": "f32", "shape": [4, 2]}, {"name": "ids", "dtype": "i64", "shape": [6]}],
        outputs=("y", "z")))
    write_npy(ctx.path("table.npy"), [4, 2], [0, 1, 10, 11, 20, 21, 30, 31])
    write_npy(ctx.path("ids.npy"), [6], [0, -1, 4, -5, 100, -100], descr="<i8")
    expected = [0, 1, 30, 31, 30, 31, 0, 1, 30, 31, 0, 1]
    for device in ("reference", "cpu", "amdgpu-emu"):
        ctx.run(["run", model, "--input", "table=table.npy", "--input", "ids=ids.npy", "--device", device,
                 "--output-dir", device], rc=0)
        for out in ("y", "z"):
            _, shape, values = read_npy(ctx.path(device, out + ".npy"))
            expect(shape == (6, 2) and values == expected,
                   "%s on %s: got %s %s, expected %s" % (out, device, shape, values, expected))
    # An empty table (a symbolic dim bound to 0 at run time): nothing to
    # select, zeros on every device, the table never read.
    model = write_json(ctx.path("e.json"), tiny_model(
        [{"y": ["embedding", "table", "ids"]}],
        inputs=[{"name": "table", "dtype": "f32", "shape": ["n", 2]}, {"name": "ids", "dtype": "i64", "shape": [3]}],
        outputs=("y",)))
    write_npy(ctx.path("empty.npy"), [0, 2], [])
    write_npy(ctx.path("ids3.npy"), [3], [0, 1, 2], descr="<i8")
    for device in ("reference", "cpu", "amdgpu-emu"):
        ctx.run(["run", model, "--input", "table=empty.npy", "--input", "ids=ids3.npy", "--device", device,
                 "--output-dir", "e-" + device], rc=0)
        _, shape, values = read_npy(ctx.path("e-" + device, "y.npy"))
        expect(shape == (3, 2) and values == [0] * 6, "empty table on %s: got %s %s" % (device, shape, values))


@case
def harden_special_constants(ctx):
    model = write_json(ctx.path("m.json"), tiny_model(
        [{"a": ["add", "x", "#c"]}, {"y": ["maximum", "a", "#floor"]}],
        constants={"c": {"dtype": "f32", "shape": [4], "values": [1, "inf", "-inf", "nan"]},
                   "floor": {"dtype": "f32", "shape": [], "value": "-inf"}}))
    write_npy(ctx.path("x.npy"), [4], [1, 2, 3, 4])
    ctx.run(["run", model, "--input", "x=x.npy"], rc=0)
    _, _, values = read_npy(ctx.path("y.npy"))
    expect(values[0] == 2 and values[1] == float("inf") and values[2] == float("-inf") and values[3] != values[3],
           "constants inf/-inf/nan: got %s" % values)
    # "-inf" for a real attribute too.
    model = write_json(ctx.path("full.json"), tiny_model(
        [{"f": ["full", {"value": "-inf", "dtype": "f32", "shape": [4]}]}, {"y": ["add", "x", "f"]}]))
    ctx.run(["run", model, "--input", "x=x.npy", "--output-dir", "full"], rc=0)
    _, _, values = read_npy(ctx.path("full", "y.npy"))
    expect(values == [float("-inf")] * 4, "full -inf: got %s" % values)
    # Out of range for the dtype: an error, not a silent inf.
    for dtype, value in (("f32", -1e39), ("f16", 70000), ("i8", 128), ("i32", 0.5), ("i64", "inf")):
        model = write_json(ctx.path("bad.json"), tiny_model(
            [{"y": ["add", "x", "#c"]}], constants={"c": {"dtype": dtype, "shape": [], "value": value}}))
        r = ctx.run(["check", model], rc=1)
        expect_diagnostic(r, model, "E0103", "/constants/c/value", message="not representable in " + dtype)
    model = write_json(ctx.path("lit.json"), tiny_model([{"y": ["mul", "x", -1e39]}]))
    r = ctx.run(["check", model], rc=1)
    expect_diagnostic(r, model, "E0103", "/main/0/y/2", message="not representable in f32")


@case
def harden_repeat_invariant_args(ctx):
    """repeat passes the arguments after the carried ones unchanged to every iteration."""
    block = {"args": ["h", "bias"], "body": [{"o": ["add", "h", "bias"]}], "return": "o"}
    model = write_json(ctx.path("m.json"), tiny_model(
        [{"y": ["repeat", "Block", "x", "b", {"times": 3, "prefix": "l{i}"}]}], {"Block": block},
        inputs=[{"name": "x", "dtype": "f32", "shape": [4]}, {"name": "b", "dtype": "f32", "shape": [4]}]))
    write_npy(ctx.path("x.npy"), [4], [1, 2, 3, 4])
    write_npy(ctx.path("b.npy"), [4], [10, 20, 30, 40])
    ctx.run(["run", model, "--input", "x=x.npy", "--input", "b=b.npy"], rc=0)
    _, _, values = read_npy(ctx.path("y.npy"))
    expect(values == [31, 62, 93, 124], "three iterations of h + b: got %s" % values)
    # The wrong number of results names the module's real count.
    model = write_json(ctx.path("bad.json"), tiny_model(
        [{"y,z": ["repeat", "Block", "x", "x", {"times": 2, "prefix": "l{i}"}]}], {"Block": block},
        outputs=("y",)))
    r = ctx.run(["check", model], rc=1)
    expect_diagnostic(r, model, "E0502", "/main/0", message="names 2 result\\(s\\), module Block returns 1")
    two = {"args": ["h"], "body": [{"o": ["relu", "h"]}], "return": ["o", "o"]}
    model = write_json(ctx.path("bad2.json"), tiny_model(
        [{"y,z": ["repeat", "Two", "x", {"times": 2, "prefix": "l{i}"}]}], {"Two": two}))
    r = ctx.run(["check", model], rc=1)
    expect_diagnostic(r, model, "E0502", "/main/0/y,z/1", message="takes 1 and returns 2")


@case
def harden_module_dims(ctx):
    """A module reshapes by its argument's dims ("x.shape[0]"), whatever the caller calls them."""
    heads = {"args": ["h"], "return": "o", "body": [
        {"r": ["reshape", "h", {"shape": ["h.shape[0]", 2, 4]}]},
        {"o": ["reshape", "r", {"shape": ["h.shape[0]", "h.shape[-1]"]}]}]}
    model = write_json(ctx.path("m.json"), tiny_model(
        [{"y": ["call", "Heads", "x"]}], {"Heads": heads},
        inputs=[{"name": "x", "dtype": "f32", "shape": ["tokens", 8]}]))
    r = ctx.run(["trace", model], rc=0)
    expect_in("shape = shape[tokens,2,4]", r.stdout, "trace", r)
    expect_in("shape = shape[tokens,8]", r.stdout, "trace", r)
    bad = {"args": ["h"], "return": "o", "body": [{"o": ["reshape", "h", {"shape": ["h.shape[2]"]}]}]}
    model = write_json(ctx.path("bad.json"), tiny_model([{"y": ["call", "Bad", "x"]}], {"Bad": bad}))
    r = ctx.run(["check", model], rc=1)
    expect_diagnostic(r, model, "E0105", "/modules/Bad/body/0/o/2/shape", message="rank 1")


@case
def harden_ops_signatures(ctx):
    """maxc ops shows operand order and dtypes (the same text as docs/ops.md)."""
    r = ctx.run(["ops"], rc=0)
    expect_in("embedding(table: T[V, D], ids: I[...]) -> T[..., D]   T: any dtype; I: i8 i32 i64", r.stdout, "ops", r)
    with open(os.path.join(ctx.source_dir, "docs", "ops.md")) as f:
        expect_in("    embedding(table: T[V, D], ids: I[...]) -> T[..., D]", f.read(), "docs/ops.md")
    ops = parse_json(ctx.run(["ops", "--json"], rc=0).stdout, "ops --json")
    where = [op for op in ops if op["name"] == "where"][0]
    expect(where["signature"].startswith("where(cond: bool[...], a: T[...], b: T[...])"), "where: %s" % where)


@case
def harden_trace_json_inline_constants(ctx):
    """trace --emit json of a model with inline constants loads back."""
    model = write_json(ctx.path("m.json"), tiny_model(
        [{"y": ["add", "x", "#c"]}], constants={"c": {"dtype": "f32", "shape": [4], "values": [1, 2, 3, 4]}}))
    ctx.run(["trace", model, "--emit", "json", "-o", "g.json"], rc=0)
    ctx.run(["check", "g.json"], rc=0)
    write_npy(ctx.path("x.npy"), [4], [1, 1, 1, 1])
    ctx.run(["run", "g.json", "--input", "x=x.npy"], rc=0)
    _, _, values = read_npy(ctx.path("y.npy"))
    expect(values == [2, 3, 4, 5], "got %s" % values)


@case
def full_disk_keeps_previous_outputs(ctx):
    """On a full file system (a small tmpfs, where this runs as root and may
    mount one) a compile fails with E0407 and leaves the previous outputs as
    they were and no temp files; a run leaves no --output-dir behind."""
    full = ctx.path("full")
    os.makedirs(full)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", full],
                                           capture_output=True).returncode != 0:
        print("skipped: cannot mount a small tmpfs here")
        return
    try:
        compile_mlp(ctx, "full")  # ~2.7 MB of weights: fits once, not twice
        before = snapshot(full)
        r = ctx.run(["compile", ctx.example("mlp"), "--weights", ctx.weights("mlp"), "-o",
                     os.path.join(full, "mlp.o"), "--cpu", "x86-64"], rc=1)
        expect_in("E0407", r.stderr, "a compile onto a full disk", r)
        expect(snapshot(full) == before and sorted(os.listdir(full)) == sorted(before),
               "a compile onto a full disk changed the previous outputs or left temps: %s" % listing(full), r)
        # Fill what is left, then run: no output directory is left behind.
        with open(os.path.join(full, "filler"), "wb", buffering=0) as f:  # unbuffered: close() has nothing to flush
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        model = write_json(ctx.path("neg.json"), tiny_model([{"y": ["neg", "x"]}]))
        write_npy(ctx.path("x.npy"), [4], [1.0, 2.0, 3.0, 4.0], descr="<f4")
        r = ctx.run(["run", model, "--input", "x=x.npy", "--output-dir", os.path.join(full, "out")], rc=1)
        expect(not os.path.exists(os.path.join(full, "out")), "a failed run left its --output-dir behind", r)
    finally:
        subprocess.run(["umount", full], capture_output=True)


@case
def compile_harness_external_weights(ctx):
    """With --weights-mode external the harnesses load NAME.weights.bin (or $NAME_WEIGHTS) before running."""
    emit = "obj,header,test-harness,bench-harness"
    os.makedirs(ctx.path("build"))
    ctx.run(["-q", "compile", ctx.example("mlp"), "-o", ctx.path("build", "mlp.o"), "--emit", emit,
             "--weights-mode", "external"], rc=0)
    cc = c_compiler()
    for prog in ["mlp_test", "mlp_bench"]:
        r = run_program([cc, "-O2", "-Wall", "-Wextra", prog + ".c", "mlp.o", "-lm", "-o", prog], ctx.path("build"), rc=0)
        expect("warning:" not in r.stderr, "%s.c should compile without warnings" % prog, r)
    write_npy(ctx.path("x.npy"), [3, 784], mlp_input(3))
    ctx.run(["run", ctx.example("mlp"), "--device", "reference", "--input", "x=x.npy", "--output-dir", "ref"], rc=0)
    r = run_program(["./mlp_test", "../x.npy", "../ref/logits.npy"], ctx.path("build"), rc=0)
    expect(re.search(r"^PASS\b", r.stdout, re.M) is not None, "the test harness should PASS", r)
    run_program(["./mlp_bench", "-n", "2"], ctx.path("build"), rc=0)
    # From another directory: not found, unless mlp_WEIGHTS names the file.
    r = run_program(["build/mlp_test", "x.npy", "ref/logits.npy"], ctx.tmp, rc=2)
    expect_in("mlp_WEIGHTS", r.stderr, "a missing weights file names the variable", r)
    env = dict(os.environ, mlp_WEIGHTS=ctx.path("build", "mlp.weights.bin"))
    r = subprocess.run(["build/mlp_test", "x.npy", "ref/logits.npy"], cwd=ctx.tmp, env=env, capture_output=True,
                       text=True)
    expect(r.returncode == 0 and "PASS" in r.stdout, "mlp_WEIGHTS should be used: %s %s" % (r.stdout, r.stderr))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--maxc", help="the maxc binary (required unless --list)")
    parser.add_argument("--source-dir", help="the maxc source tree, for examples/ (required unless --list)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--case", help="the case to run")
    group.add_argument("--list", action="store_true", help="print the case names")
    group.add_argument("--list-known-bugs", action="store_true",
                       help="print the cases that fail because of a known maxc bug (docstring 'Fails with maxc')")
    group.add_argument("--all", action="store_true", help="run every case")
    args = parser.parse_args()
    if args.list:
        print("\n".join(CASES))
        return 0
    if args.list_known_bugs:
        print("\n".join(name for name, fn in CASES.items() if "Fails with maxc" in (fn.__doc__ or "")))
        return 0
    if not args.maxc or not args.source_dir:
        parser.error("--maxc and --source-dir are required to run cases")
    names = list(CASES) if args.all else [args.case]
    for name in names:
        if name not in CASES:
            print("unknown case %r; cases: %s" % (name, ", ".join(CASES)), file=sys.stderr)
            return 2
    maxc = os.path.abspath(args.maxc)
    source_dir = os.path.abspath(args.source_dir)
    failed = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="maxc-cli-") as tmp:
            try:
                CASES[name](Context(maxc, source_dir, tmp))
                print("PASS %s" % name)
            except Failure as e:
                print("FAIL %s\n%s" % (name, e))
                doc = CASES[name].__doc__
                if doc and "Fails with" in doc:
                    print("\n(known maxc bug, see the case's docstring:)\n" + doc.strip())
                failed.append(name)
    if len(names) > 1:
        print("%d/%d passed%s" % (len(names) - len(failed), len(names),
                                  "; failed: " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
