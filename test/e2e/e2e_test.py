#!/usr/bin/env python3
"""End-to-end tests of `maxc compile`: compile, link into a C program, run.

    test/e2e/e2e_test.py --maxc build/bin/maxc --source-dir . --case NAME
    test/e2e/e2e_test.py --list
    test/e2e/e2e_test.py --maxc build/bin/maxc --source-dir . --all

Each case is one ctest entry (test/CMakeLists.txt registers "e2e-NAME" for
every name --list prints). A case whose docstring says "Fails with maxc ..."
checks behaviour that a known maxc bug breaks: it fails until the bug is
fixed and carries the ctest label "known-bug" (`ctest -LE known-bug` skips
them); the docstring says where the bug is. A case runs in a fresh temporary
directory: it compiles example models with maxc, writes a small C harness
there, builds it with `cc` against the generated object and header, runs it
on random inputs and compares the outputs with `maxc run --device reference`.
Exit status: 0 pass, 1 fail (with an explanation), 2 bad usage.

Needs the Python standard library, a C compiler on PATH as `cc`, and for
some cases LLVM 19's binutils (llvm-readelf-19, llvm-nm-19, llvm-size-19,
llvm-objdump-19). The example weights (examples/<name>/<name>.safetensors)
come from the build (the `example-weights` target).
"""

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from maxc_testlib import Failure, describe, expect, expect_in, listing, read_npy, read_tensor_pb, tail, write_npy_raw  # noqa: E402

EXAMPLES = ["mlp", "cnn", "gpt"]

# Compiled code accumulates in f32 (and in a different order: blocked GEMMs,
# vector reductions, polynomial transcendentals) while the reference
# interpreter computes in double and rounds once, so compiled outputs match
# the reference only up to rounding: |got - want| <= ATOL + RTOL * |want|
# elementwise (numpy.allclose's rule).
RTOL = 1e-4
ATOL = 1e-5

# Seed of the random inputs; fixed so a failure reproduces.
SEED = 20240601


# ---------------------------------------------------------------------------
# Running maxc and other tools


def run_command(cmd, cwd, rc=None, timeout=120):
    try:
        r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure("timed out after %ds: %s" % (timeout, " ".join(cmd)))
    except OSError as e:
        raise Failure("cannot run %s: %s" % (cmd[0], e))
    r.cmd = cmd
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    if rc is not None and r.returncode != rc:
        raise Failure("expected exit %d, got %d\n%s" % (rc, r.returncode, describe(r)))
    return r


def require_tool(name, purpose):
    path = shutil.which(name)
    if path is None:
        raise Failure("'%s' is not on PATH; this case needs it to %s" % (name, purpose))
    return path


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

    def mkdir(self, *parts):
        path = self.path(*parts)
        os.makedirs(path, exist_ok=True)
        return path

    def run(self, args, rc=None, cwd=None, timeout=120):
        """Runs maxc with `args`; checks the exit status when `rc` is given."""
        return run_command([self.maxc] + list(args), cwd or self.tmp, rc, timeout)

    def compile(self, model, out_dir, name=None, extra=()):
        """`maxc compile MODEL -o OUT_DIR/NAME.o`; returns (object path, manifest dict)."""
        name = name or os.path.basename(os.path.dirname(model))
        obj = os.path.join(out_dir, name + ".o")
        args = ["-q", "compile", model, "-o", obj] + (["--name", name]) + list(extra)
        self.run(args, rc=0)
        with open(os.path.join(out_dir, name + ".manifest.json")) as f:
            manifest = json.load(f)
        return obj, manifest

    def cc(self, sources, objects, output, compiler="cc"):
        """Builds a C program from `sources` (in the temp dir) and maxc objects."""
        cc = require_tool(compiler, "build the C harness that links the generated object")
        cmd = [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", self.tmp] + list(sources) + \
            list(objects) + ["-lm", "-o", output]
        run_command(cmd, self.tmp, rc=0)
        return output


# ---------------------------------------------------------------------------
# .npy files and raw tensors


DTYPES = {
    # maxc dtype: (C type, npy descr, struct/array format, bytes)
    "f32": ("float", "<f4", "f", 4),
    "f64": ("double", "<f8", "d", 8),
    "i64": ("int64_t", "<i8", "q", 8),
    "i32": ("int32_t", "<i4", "i", 4),
    "i8": ("int8_t", "|i1", "b", 1),
}


def dtype_info(dtype):
    if dtype not in DTYPES:
        raise Failure("this test does not handle dtype %r" % dtype)
    return DTYPES[dtype]


def pack(dtype, values):
    """Values as little-endian raw bytes of `dtype`."""
    fmt = dtype_info(dtype)[2]
    return struct.pack("<%d%s" % (len(values), fmt), *values)


def unpack(dtype, raw, what):
    fmt, size = dtype_info(dtype)[2], dtype_info(dtype)[3]
    if len(raw) % size:
        raise Failure("%s: %d bytes is not a whole number of %s" % (what, len(raw), dtype))
    return list(struct.unpack("<%d%s" % (len(raw) // size, fmt), raw))


def read_raw(path, dtype):
    with open(path, "rb") as f:
        return unpack(dtype, f.read(), path)


def eval_shape(shape, dims):
    """A manifest shape (ints and symbolic dims such as "batch") under `dims`."""
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(dims[d])
        else:
            raise Failure("cannot evaluate dim %r with %s" % (d, dims))
    return out


def count_of(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def random_input(rng, spec, shape):
    """Random data for an input: floats in [-1, 1), token ids in [0, 1024)."""
    n = count_of(shape)
    if spec["dtype"].startswith("f"):
        return [rng.uniform(-1.0, 1.0) for _ in range(n)]
    if spec["dtype"] in ("i64", "i32"):
        # The only integer inputs of the examples are GPT token ids (vocab 1024).
        return [rng.randrange(0, 1024) for _ in range(n)]
    raise Failure("no random data for input %s of dtype %s" % (spec["name"], spec["dtype"]))


def compare(actual, expected, what, rtol=RTOL, atol=ATOL):
    """Elementwise |a - e| <= atol + rtol * |e|; reports the worst mismatches."""
    expect(len(actual) == len(expected), "%s: %d values, expected %d" % (what, len(actual), len(expected)))
    expect(any(e != 0 for e in expected), "%s: the reference output is all zeros: the test input is too weak" % what)
    bad = []
    worst_abs, worst_rel = 0.0, 0.0
    for i, (a, e) in enumerate(zip(actual, expected)):
        diff = abs(a - e)
        if math.isnan(a) or math.isnan(e) or diff > atol + rtol * abs(e):
            bad.append((i, a, e))
        if not math.isnan(diff):
            worst_abs = max(worst_abs, diff)
            if e != 0:
                worst_rel = max(worst_rel, diff / abs(e))
    if bad:
        lines = ["  [%d] got %r, expected %r (diff %.3g)" % (i, a, e, abs(a - e)) for i, a, e in bad[:10]]
        raise Failure("%s: %d of %d values differ from the reference beyond rtol %g / atol %g "
                      "(max abs diff %.3g, max rel diff %.3g); first ones:\n%s"
                      % (what, len(bad), len(actual), rtol, atol, worst_abs, worst_rel, "\n".join(lines)))
    return worst_abs, worst_rel


# ---------------------------------------------------------------------------
# C harness generation, driven by the manifest's interface


C_PRELUDE = r"""#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define MAYBE_UNUSED __attribute__((unused))
#else
#define MAYBE_UNUSED
#endif

MAYBE_UNUSED static void *read_exact(const char *path, size_t bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(10); }
  void *p = malloc(bytes ? bytes : 1);
  if (!p) { fprintf(stderr, "out of memory\n"); exit(10); }
  size_t got = fread(p, 1, bytes, f);
  if (got != bytes || fgetc(f) != EOF) {
    fprintf(stderr, "%s: expected exactly %zu bytes\n", path, bytes);
    exit(10);
  }
  fclose(f);
  return p;
}

MAYBE_UNUSED static void write_all(const char *path, const void *p, size_t bytes) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f) != 0) { perror(path); exit(10); }
}

/* Output buffers start as all-ones bytes (NaN floats), so elements the model
   does not write show up as mismatches. */
MAYBE_UNUSED static void *alloc_poisoned(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) { fprintf(stderr, "out of memory\n"); exit(10); }
  memset(p, 0xff, bytes);
  return p;
}

/* A caller-provided workspace: 64-byte aligned, filled with garbage so a
   kernel that relies on zeroed scratch memory fails. */
MAYBE_UNUSED static void *alloc_workspace(int64_t bytes) {
  void *p = NULL;
  if (bytes <= 0) { fprintf(stderr, "workspace size %" PRId64 " is not positive\n", bytes); exit(11); }
  if (posix_memalign(&p, 64, (size_t)bytes) != 0) { fprintf(stderr, "out of memory\n"); exit(10); }
  memset(p, 0xa5, (size_t)bytes);
  return p;
}

MAYBE_UNUSED static int64_t parse_dim(const char *text) {
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (!*text || *end) { fprintf(stderr, "bad dim '%s'\n", text); exit(2); }
  return (int64_t)v;
}
"""


def c_dim(d):
    return "(int64_t)%d" % d if isinstance(d, int) else "d_%s" % d


def c_count(shape):
    return "(size_t)(%s)" % (" * ".join(c_dim(d) for d in shape) if shape else "1")


def check_interface(iface):
    for tensor in iface["inputs"] + iface["outputs"]:
        dtype_info(tensor["dtype"])
        for d in tensor["shape"]:
            if not isinstance(d, int) and d not in iface["dims"]:
                raise Failure("shape %s of %s: dim %r is not one of the interface dims %s"
                              % (tensor["shape"], tensor["name"], d, iface["dims"]))


def harness_runner(name, iface):
    """C function `run_NAME(args, caller_ws)` with args = dims..., input files..., output files...

    Calls NAME_run once and writes each output's raw bytes."""
    check_interface(iface)
    upper = name.upper()
    dims, inputs, outputs = iface["dims"], iface["inputs"], iface["outputs"]
    lines = ["static int run_%s(char **arg, int caller_ws) {" % name]
    for i, d in enumerate(dims):
        lines.append("  int64_t d_%s = parse_dim(arg[%d]);" % (d, i))
    call = []
    for i, t in enumerate(inputs):
        ctype = dtype_info(t["dtype"])[0]
        lines.append("  size_t n_in%d = %s;" % (i, c_count(t["shape"])))
        lines.append("  %s *in%d = (%s *)read_exact(arg[%d], n_in%d * sizeof(%s));"
                     % (ctype, i, ctype, len(dims) + i, i, ctype))
        call.append("in%d" % i)
    for i, t in enumerate(outputs):
        ctype = dtype_info(t["dtype"])[0]
        lines.append("  size_t n_out%d = %s;" % (i, c_count(t["shape"])))
        lines.append("  %s *out%d = (%s *)alloc_poisoned(n_out%d * sizeof(%s));" % (ctype, i, ctype, i, ctype))
        call.append("out%d" % i)
    dim_args = ", ".join("d_%s" % d for d in dims)
    lines.append("  if (threads > 0) %s_set_num_threads(threads);" % name)
    lines.append("  void *ws = caller_ws ? alloc_workspace(%s_workspace_size(%s)) : NULL;" % (name, dim_args))
    call += ["d_%s" % d for d in dims] + ["ws"]
    lines.append("  int32_t status = %s_run(%s);" % (name, ", ".join(call)))
    lines.append("  if (status != %s_OK) {" % upper)
    lines.append("    fprintf(stderr, \"%s_run returned status %%d: %%s\\n\", (int)status, %s_status_string(status));"
                 % (name, name))
    lines.append("    return 1;")
    lines.append("  }")
    for i, t in enumerate(outputs):
        ctype = dtype_info(t["dtype"])[0]
        lines.append("  write_all(arg[%d], out%d, n_out%d * sizeof(%s));" % (len(dims) + len(inputs) + i, i, i, ctype))
    for i in range(len(inputs)):
        lines.append("  free(in%d);" % i)
    for i in range(len(outputs)):
        lines.append("  free(out%d);" % i)
    lines.append("  free(ws);")
    lines.append("  return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_harness(ctx, models, path="harness.c"):
    """A C program that runs any of `models` ({name: interface}).

    Usage: app [--workspace] [--threads N] NAME DIMS... INPUTS... OUTPUTS... [NAME ...]
    --workspace passes a caller-allocated workspace instead of NULL; --threads N
    calls NAME_set_num_threads(N) before the runs that follow."""
    parts = [C_PRELUDE]
    parts += ['#include "%s.h"\n' % name for name in models]
    parts.append("static int threads = 0; /* --threads N: NAME_set_num_threads(N) before each run */\n")
    parts += [harness_runner(name, iface) for name, iface in models.items()]
    main = ["int main(int argc, char **argv) {", "  int caller_ws = 0;", "  int i = 1;", "  while (i < argc) {",
            "    if (strcmp(argv[i], \"--workspace\") == 0) { caller_ws = 1; ++i; continue; }",
            "    if (strcmp(argv[i], \"--threads\") == 0 && i + 1 < argc) { threads = atoi(argv[i + 1]); i += 2; continue; }"]
    for name, iface in models.items():
        n = len(iface["dims"]) + len(iface["inputs"]) + len(iface["outputs"])
        main += ["    if (strcmp(argv[i], \"%s\") == 0) {" % name,
                 "      if (argc - i - 1 < %d) { fprintf(stderr, \"%s needs %d arguments\\n\"); return 2; }"
                 % (n, name, n),
                 "      if (run_%s(argv + i + 1, caller_ws) != 0) return 1;" % name,
                 "      i += 1 + %d;" % n,
                 "      continue;",
                 "    }"]
    main += ["    fprintf(stderr, \"unknown model '%s'\\n\", argv[i]);", "    return 2;", "  }", "  return 0;", "}"]
    parts.append("\n".join(main) + "\n")
    with open(ctx.path(path), "w") as f:
        f.write("\n".join(parts))
    return ctx.path(path)


class Job:
    """One run of one model on random inputs: files for the harness and for `maxc run`."""

    def __init__(self, ctx, name, iface, dims, rng, tag):
        self.name, self.iface, self.dims, self.tag = name, iface, dims, tag
        self.inputs = []  # (spec, shape, raw path, npy path)
        for spec in iface["inputs"]:
            shape = eval_shape(spec["shape"], dims)
            raw = pack(spec["dtype"], random_input(rng, spec, shape))
            raw_path = ctx.path("%s.%s.in.bin" % (tag, spec["name"]))
            with open(raw_path, "wb") as f:
                f.write(raw)
            npy_path = write_npy_raw(ctx.path("%s.%s.npy" % (tag, spec["name"])), dtype_info(spec["dtype"])[1],
                                     shape, raw)
            self.inputs.append((spec, shape, raw_path, npy_path))
        self.outputs = []  # (spec, shape, raw path)
        for spec in iface["outputs"]:
            self.outputs.append((spec, eval_shape(spec["shape"], dims),
                                 ctx.path("%s.%s.out.bin" % (tag, spec["name"]))))

    def harness_args(self):
        return ([self.name] + [str(self.dims[d]) for d in self.iface["dims"]] +
                [p for _, _, p, _ in self.inputs] + [p for _, _, p in self.outputs])

    def maxc_run_args(self, model, out_dir, device):
        args = ["-q", "run", model, "--output-dir", out_dir, "--device", device]
        for spec, _, _, npy in self.inputs:
            args += ["--input", "%s=%s" % (spec["name"], npy)]
        return args

    def check_against(self, ctx, model, what):
        """Compares the harness's raw outputs with `maxc run --device reference`."""
        ref_dir = ctx.path(self.tag + ".reference")
        ctx.run(self.maxc_run_args(model, ref_dir, "reference"), rc=0)
        for spec, shape, raw_path in self.outputs:
            expect(os.path.exists(raw_path), "%s: the harness wrote no %s" % (what, raw_path))
            got = read_raw(raw_path, spec["dtype"])
            descr, ref_shape, want = read_npy(os.path.join(ref_dir, spec["name"] + ".npy"))
            expect(list(ref_shape) == shape, "%s: reference %s has shape %s, the manifest says %s"
                   % (what, spec["name"], list(ref_shape), shape))
            worst = compare(got, want, "%s output %s" % (what, spec["name"]))
            print("%s %s %s: max abs diff %.3g, max rel diff %.3g" % (what, spec["name"], shape, worst[0], worst[1]))


# ---------------------------------------------------------------------------
# Cases

CASES = {}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


def compile_link_run(ctx, name, batches, extra=(), compiler="cc", runner=()):
    """Compiles example `name` (with `extra` flags), links the harness with
    `compiler` and runs it (through `runner`, e.g. qemu) on each batch,
    against the reference."""
    model = ctx.example(name)
    ctx.weights(name)
    obj, manifest = ctx.compile(model, ctx.tmp, name, extra)
    iface = manifest["interface"]
    app = ctx.cc([write_harness(ctx, {name: iface})], [obj], ctx.path("app"), compiler)
    rng = random.Random(SEED)
    for batch in batches:
        dims = {d: batch for d in iface["dims"]}
        expect(set(iface["dims"]) <= {"batch"}, "unexpected symbolic dims %s" % iface["dims"])
        job = Job(ctx, name, iface, dims, rng, "b%d" % batch)
        start = time.time()
        run_command(list(runner) + [app] + job.harness_args(), ctx.tmp, rc=0, timeout=300)
        print("%s batch %d%s: compiled code ran in %.2f s" % (name, batch, " under " + runner[0] if runner else "",
                                                              time.time() - start))
        job.check_against(ctx, model, "%s batch %d" % (name, batch))
    return manifest


@case
def compile_link_run_mlp(ctx):
    # The batch is symbolic: the same object runs batches 1 and 5.
    compile_link_run(ctx, "mlp", [1, 5])


@case
def compile_link_run_cnn(ctx):
    compile_link_run(ctx, "cnn", [2])


@case
def compile_link_run_gpt(ctx):
    compile_link_run(ctx, "gpt", [2])


def generate_tokens(ctx, model, prompt, n, device, extra=()):
    """`maxc run MODEL --generate N` on `device`: the generated tokens."""
    r = ctx.run(["run", model, "--prompt", ",".join(map(str, prompt)), "--generate", str(n), "--device", device]
                + list(extra), rc=0, timeout=300)
    return [int(t) for t in r.stdout.split()]


@case
def llama_generate(ctx):
    """examples/llama: its C program (llama_state_create / llama_step) decodes
    two prompts interleaved, each in its own state; the tokens equal `maxc run
    --generate` on the reference interpreter, on --device cpu and on
    --device amdgpu-emu (the GPU kernels, one prompt), and a
    prompt extended by generated tokens continues with the same tokens (the
    cached keys/values equal a prefill of the whole sequence)."""
    model = ctx.example("llama")
    ctx.weights("llama")
    obj, manifest = ctx.compile(model, ctx.tmp, "llama")
    expect([s["name"] for s in manifest["interface"]["state"]["buffers"]][:2] == ["k_cache_0", "v_cache_0"],
           "the manifest's state: %s" % manifest["interface"].get("state"))
    demo = os.path.join(ctx.source_dir, "examples", "llama", "llama_demo.c")
    app = ctx.cc([demo], [obj], ctx.path("llama_demo"))
    prompts, n = [[1, 2, 3, 4, 5, 6, 7], [900, 17]], 10
    r = run_command([app, str(n)] + [",".join(map(str, p)) for p in prompts], ctx.tmp, rc=0)
    compiled = [[int(t) for t in line.split()] for line in r.stdout.splitlines()]
    print(r.stderr.strip())
    expect(len(compiled) == 2 and all(len(t) == n for t in compiled), "llama_demo printed %r" % r.stdout)
    for prompt, tokens in zip(prompts, compiled):
        reference = generate_tokens(ctx, model, prompt, n, "reference")
        expect(tokens == reference, "prompt %s: llama_demo generated %s, maxc run --generate (reference) %s"
               % (prompt, tokens, reference))
        jit = generate_tokens(ctx, model, prompt, n, "cpu", ["--threads", "2"])
        expect(jit == reference, "prompt %s: --device cpu generated %s, the reference %s" % (prompt, jit, reference))
        print("prompt %s: %s (C program = reference = --device cpu)" % (prompt, tokens))
    # The GPU kernels (emulated: ~5 s, so one prompt) decode the same tokens through the state.
    emu = generate_tokens(ctx, model, prompts[1], n, "amdgpu-emu")
    expect(emu == compiled[1], "prompt %s: --device amdgpu-emu generated %s, the C program %s"
           % (prompts[1], emu, compiled[1]))
    # The same model in numpy (examples/llama/numpy_reference.py), when numpy is there (python3-onnx brings it).
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("numpy is missing: the comparison with examples/llama/numpy_reference.py is skipped")
    else:
        sys.path.insert(0, os.path.dirname(demo))
        import numpy_reference
        llama = numpy_reference.Llama(model, ctx.weights("llama"))
        for prompt, tokens in zip(prompts, compiled):
            want = llama.generate(prompt, n)
            expect(tokens == want, "prompt %s: maxc generated %s, the numpy model %s" % (prompt, tokens, want))
        print("numpy_reference.py generates the same tokens")
    rest = generate_tokens(ctx, model, prompts[0] + compiled[0][:4], n - 4, "cpu")
    expect(rest == compiled[0][4:], "the prompt extended by 4 generated tokens continues with %s, not %s"
           % (rest, compiled[0][4:]))


@case
def tensor_parallel(ctx):
    """`maxc compile --tensor-parallel 2` (docs/tensor-parallel.md): the GPT
    and Llama examples' rank programs, linked into the C programs of
    examples/tensor-parallel with a communicator over threads and one over
    MPI (run under mpirun -np 2 on this machine), give the unsplit model's
    logits (<= 1e-4) and, for Llama decoding through each rank's own state,
    the same greedy tokens; a rank run without a communicator returns
    NAME_ERROR_COLLECTIVE."""
    src = os.path.join(ctx.source_dir, "examples", "tensor-parallel")
    mpicc = require_tool("mpicc", "build the MPI variant (scripts/install-deps installs libopenmpi-dev)")
    mpirun = require_tool("mpirun", "run the MPI variant (openmpi-bin)")
    cc = require_tool("cc", "build the C programs")
    for model, args in [("gpt", []), ("llama", ["10", "1,2,3,4,5,6,7"])]:
        ctx.weights(model)
        ctx.compile(ctx.example(model), ctx.tmp, model)
        ctx.run(["-q", "compile", ctx.example(model), "--tensor-parallel", "2", "-o", ctx.path(model + ".o")], rc=0)
        manifests = []
        for r in range(2):
            with open(ctx.path("%s_rank%d.manifest.json" % (model, r))) as f:
                manifests.append(json.load(f))
            expect(manifests[r]["interface"].get("tensor_parallel") == {"world": 2, "rank": r},
                   "%s_rank%d's manifest: %s" % (model, r, manifests[r]["interface"].get("tensor_parallel")))
            expect("%s_rank%d_set_communicator" % (model, r) in manifests[r]["interface"]["entry_points"],
                   "the rank's entry points lack NAME_set_communicator")
        with open(ctx.path(model + ".manifest.json")) as f:
            whole = json.load(f)
        expect(manifests[0]["memory"]["weights_bytes"] < 0.7 * whole["memory"]["weights_bytes"],
               "rank 0 holds %d of %d weight bytes" % (manifests[0]["memory"]["weights_bytes"],
                                                      whole["memory"]["weights_bytes"]))
        objects = [ctx.path(model + ".o"), ctx.path(model + "_rank0.o"), ctx.path(model + "_rank1.o")]
        program = os.path.join(src, model + "_tp.c")
        flags = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", ctx.tmp, "-I", src]
        run_command([cc] + flags + ["-pthread", program] + objects + ["-lm", "-o", ctx.path(model + "_tp")],
                    ctx.tmp, rc=0)
        threads = run_command([ctx.path(model + "_tp")] + args, ctx.tmp, rc=0)
        print("threads: " + (threads.stdout + threads.stderr).strip())
        run_command([mpicc] + flags + ["-DMAXC_TP_MPI", program] + objects + ["-lm", "-o", ctx.path(model + "_mpi")],
                    ctx.tmp, rc=0)
        # One node: `--mca plm isolated` launches without ssh (OpenMPI 4.1 wants an rsh agent otherwise);
        # no single-copy shared memory (containers often forbid the ptrace it needs).
        mpi = run_command([mpirun, "--allow-run-as-root", "--oversubscribe", "--mca", "plm", "isolated",
                           "--mca", "btl_vader_single_copy_mechanism", "none", "-np", "2",
                           ctx.path(model + "_mpi")] + args, ctx.tmp, rc=0, timeout=120)
        print("mpirun -np 2: " + (mpi.stdout + mpi.stderr).strip())
        if model == "llama":
            expect(threads.stdout == mpi.stdout, "threads decoded %r, MPI %r" % (threads.stdout, mpi.stdout))
            tokens = [int(t) for t in threads.stdout.split()]
            reference = generate_tokens(ctx, ctx.example(model), [1, 2, 3, 4, 5, 6, 7], 10, "reference")
            expect(tokens == reference, "the ranks decoded %s, maxc run --generate %s" % (tokens, reference))


# ---------------------------------------------------------------------------
# Other CPUs, under qemu-user (Debian's qemu-user; TOOLCHAIN: emulated
# timings mean nothing, correctness does). `qemu-x86_64 -cpu max` is an
# x86-64 with AVX2 and no AVX-512; `qemu-aarch64 -cpu max` has every aarch64
# feature maxc checks, `-cpu cortex-a53` none beyond the baseline.

QEMU_X86_MAX = ["qemu-x86_64", "-cpu", "max"]
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"


def qemu_aarch64(cpu="max"):
    require_tool("qemu-aarch64", "run aarch64 programs")
    return ["qemu-aarch64", "-cpu", cpu, "-L", AARCH64_SYSROOT]


def unsupported_cpu_run(ctx, name, extra, compiler, runner, missing, cpu):
    """Example `name` compiled with `extra`, its harness run through `runner`
    on a CPU without the features `missing`: NAME_run returns
    NAME_ERROR_UNSUPPORTED_CPU naming exactly them (no SIGILL)."""
    out = ctx.mkdir("unsupported")
    model = ctx.example(name)
    obj, manifest = ctx.compile(model, out, name, extra)
    iface = manifest["interface"]
    features = manifest["target"]["checked_features"]
    for f in missing:
        expect_in(f, features, "the manifest's checked features")
    app = ctx.cc([write_harness(ctx, {name: iface}, os.path.join(out, "harness.c"))], [obj],
                 os.path.join(out, "app"), compiler)
    job = Job(ctx, name, iface, {d: 1 for d in iface["dims"]}, random.Random(SEED), "unsupported")
    r = run_command(list(runner) + [app] + job.harness_args(), out, rc=1, timeout=300)
    expect_in("%s_run returned status 9: this CPU lacks %s (model '%s' was compiled for %s)"
              % (name, ", ".join(missing), name, cpu), r.stderr, "the harness's error", r)
    expect("signal" not in r.stderr, "the run died of a signal", r)
    print("%s --cpu %s: %s" % (name, cpu, r.stderr.strip()))


@case
def default_cpu_under_qemu(ctx):
    """maxc compile's default CPU (portable: x86-64-v3, i.e. AVX2, FMA, F16C,
    BMI2) runs every example correctly on an x86-64 without AVX-512
    (qemu-x86_64 -cpu max), whatever CPU compiled it."""
    require_tool("qemu-x86_64", "run x86-64 programs on an emulated CPU")
    for name, batches in (("mlp", [3]), ("cnn", [1]), ("gpt", [1])):
        manifest = compile_link_run(ctx, name, batches, runner=QEMU_X86_MAX)
        target = manifest["target"]
        expect(target["cpu_requested"] == "portable" and target["cpu"] == "x86-64-v3", "default CPU: %s" % target)
        features = target["checked_features"]
        expect("avx2" in features and not any(f.startswith("avx512") for f in features),
               "x86-64-v3 checks %s" % features)


@case
def unsupported_cpu_x86_64(ctx):
    """An object built for AVX-512 (--cpu skylake-avx512) run on a CPU
    without it (qemu-x86_64 -cpu max, which also lacks PREFETCHW):
    NAME_ERROR_UNSUPPORTED_CPU, and
    NAME_status_string names the missing features; never SIGILL."""
    require_tool("qemu-x86_64", "run x86-64 programs on an emulated CPU")
    unsupported_cpu_run(ctx, "mlp", ["--cpu", "skylake-avx512"], "cc", QEMU_X86_MAX,
                        ["prfchw", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"], "skylake-avx512")


@case
def cpu_check_entry_points(ctx):
    """The header and manifest name the CPU and the checked features;
    NAME_check_cpu() is OK on the CPU the code was built for (native), and a
    baseline object (--cpu x86-64) checks nothing: its NAME_check_cpu() is OK."""
    ctx.weights("mlp")
    native = ctx.mkdir("native")
    obj, manifest = ctx.compile(ctx.example("mlp"), native, "mlp", ["--cpu", "native"])
    header = open(os.path.join(native, "mlp.h")).read()
    features = manifest["target"]["checked_features"]
    expect(features, "a native object checks no CPU feature: %s" % manifest["target"])
    expect_in('#define MLP_CPU_FEATURES "%s"' % ",".join(features), header, "mlp.h")
    expect_in('#define MLP_CPU "%s"' % manifest["target"]["cpu"], header, "mlp.h")
    expect_in("mlp_check_cpu", manifest["interface"]["entry_points"], "the manifest's entry points")
    with open(os.path.join(native, "check.c"), "w") as f:
        f.write('#include <stdio.h>\n#include "mlp.h"\n'
                'int main(void) { int32_t s = mlp_check_cpu(); printf("%d %s\\n", (int)s, mlp_status_string(s));'
                ' printf("%s\\n", mlp_status_string(MLP_ERROR_UNSUPPORTED_CPU)); return s == MLP_OK ? 0 : 1; }\n')
    run_command([require_tool("cc", "build a C program"), "-std=c11", "-I", native, "check.c", obj, "-lm", "-o",
                 "check"], native, rc=0)
    r = run_command([os.path.join(native, "check")], native, rc=0)
    expect_in("0 ok", r.stdout, "mlp_check_cpu() on the host", r)
    # Status 9's message on a CPU that lacks nothing: the general one.
    expect_in("this CPU lacks instructions the code was compiled for", r.stdout, "mlp_status_string(9) here", r)
    base = ctx.mkdir("baseline")
    obj, manifest = ctx.compile(ctx.example("mlp"), base, "mlp", ["--cpu", "x86-64"])
    expect(manifest["target"]["checked_features"] == [], "x86-64 checks %s" % manifest["target"]["checked_features"])
    expect_in("mlp_check_cpu", manifest["interface"]["entry_points"], "a baseline object's entry points")
    expect_in('#define MLP_CPU_FEATURES ""', open(os.path.join(base, "mlp.h")).read(), "mlp.h (x86-64)")
    run_command([require_tool("cc", "build a C program"), "-std=c11", "-I", base, os.path.join(native, "check.c"),
                 obj, "-lm", "-o", "check"], base, rc=0)
    r = run_command([os.path.join(base, "check")], base, rc=0)
    expect_in("0 ok", r.stdout, "mlp_check_cpu() of a baseline object", r)


# ONNX node tests (Debian's libonnx-testdata, data someone else wrote), one
# or two per op family, compiled for another CPU and run there under qemu by
# maxc's generated test harness (NAME_test.c) against the tests' expected
# outputs. Tests whose inputs are shapes, axes or pads are left to the JIT
# conformance run (here they would be run-time tensors).
QEMU_OP_TESTS = [
    "test_add_bcast", "test_div", "test_pow", "test_max_example", "test_mean_example",  # elementwise, broadcasting
    "test_sigmoid", "test_tanh", "test_exp", "test_erf", "test_where_long_example",    # transcendental, select
    "test_reduce_mean_keepdims_random", "test_reduce_max_keepdims_random",             # reductions
    "test_softmax_axis_1", "test_logsoftmax_axis_1", "test_hardmax_axis_1",            # row kernels
    "test_matmul_3d", "test_matmul_4d", "test_gemm_all_attributes", "test_einsum_batch_matmul",  # GEMM
    "test_conv_with_strides_padding", "test_convtranspose",                            # conv
    "test_maxpool_2d_pads", "test_averagepool_2d_strides", "test_globalaveragepool",   # pooling
    "test_batchnorm_epsilon", "test_instancenorm_example", "test_layer_normalization_4d_axis1",  # norms
    "test_transpose_all_permutations_1", "test_concat_3d_axis_1", "test_gather_0",     # data movement
    "test_split_equal_parts_1d", "test_depthtospace_example",
    "test_cast_FLOAT_to_FLOAT16", "test_argmax_default_axis_example",                  # dtypes
    "test_lstm_defaults", "test_gru_defaults",                                         # recurrence kernel
]


def onnx_ops_under_qemu(ctx, extra, compiler, runner):
    """Compiles each QEMU_OP_TESTS model with `extra`, links its generated
    test harness with `compiler` and runs it through `runner` on the test's
    inputs against its expected outputs (rtol 1e-3, atol 1e-5)."""
    data = os.environ.get("MAXC_ONNX_TESTDATA", "/usr/share/libonnx-testdata/data")
    start = time.time()
    for test in QEMU_OP_TESTS:
        src = os.path.join(data, "node", test)
        expect(os.path.isdir(src), "%s is missing (apt-get install libonnx-testdata)" % src)
        out = ctx.mkdir(test)
        ctx.run(["-q", "compile", os.path.join(src, "model.onnx"), "-o", os.path.join(out, "op.o"), "--name", "op",
                 "--emit", "obj,header,test-harness"] + list(extra), rc=0)
        app = ctx.cc([os.path.join(out, "op_test.c")], [os.path.join(out, "op.o")], os.path.join(out, "op_test"),
                     compiler)
        files = {"input": [], "output": []}
        case_dir = os.path.join(src, "test_data_set_0")
        for kind in ("input", "output"):
            i = 0
            while os.path.exists(os.path.join(case_dir, "%s_%d.pb" % (kind, i))):
                descr, shape, raw = read_tensor_pb(os.path.join(case_dir, "%s_%d.pb" % (kind, i)))
                files[kind].append(write_npy_raw(os.path.join(out, "%s_%d.npy" % (kind, i)), descr, shape, raw))
                i += 1
        r = run_command(list(runner) + [app] + files["input"] + files["output"] + ["--rtol", "1e-3", "--atol", "1e-5"],
                        out, timeout=120)
        expect(r.returncode == 0, "%s: the compiled op does not match the test's outputs" % test, r)
    print("%d ONNX node tests passed under %s in %.1f s" % (len(QEMU_OP_TESTS), runner[0], time.time() - start))


@case
def onnx_ops_aarch64_under_qemu(ctx):
    """The op families of QEMU_OP_TESTS compiled for aarch64 (neoverse-n1:
    NEON, dotprod, fp16) pass their ONNX node tests under qemu-aarch64."""
    gcc = "aarch64-linux-gnu-gcc"
    require_tool(gcc, "link aarch64 programs")
    onnx_ops_under_qemu(ctx, ["--target", "aarch64-linux-gnu", "--cpu", "neoverse-n1"], gcc, qemu_aarch64())


@case
def onnx_ops_x86_64_v3_under_qemu(ctx):
    """The op families of QEMU_OP_TESTS compiled for x86-64-v3 pass their
    ONNX node tests on an x86-64 without AVX-512 (qemu-x86_64 -cpu max)."""
    require_tool("qemu-x86_64", "run x86-64 programs on an emulated CPU")
    onnx_ops_under_qemu(ctx, ["--cpu", "x86-64-v3"], "cc", QEMU_X86_MAX)


@case
def cpu_variants(ctx):
    """--cpu x86-64-v2,x86-64-v3,znver2,skylake-avx512: one object with four
    code variants, their GEMM weights packed once per vector width (v3 and
    znver2 share 8-lane panels); each CPU runs the most capable variant it supports
    (NAME_cpu_variant: v2 on an emulated Nehalem, v3 on qemu's AVX2 CPU),
    correctly; an SSE3-only CPU gets NAME_ERROR_UNSUPPORTED_CPU naming what
    the least demanding variant needs; the bytes do not depend on --jobs."""
    require_tool("qemu-x86_64", "run x86-64 programs on an emulated CPU")
    cpus = "x86-64-v2,x86-64-v3,znver2,skylake-avx512"
    manifest = compile_link_run(ctx, "mlp", [3], ["--cpu", cpus, "-j", "2"], runner=QEMU_X86_MAX)
    target = manifest["target"]
    expect(target["cpu"] == cpus and [v["cpu"] for v in target["variants"]] == cpus.split(","),
           "manifest target: %s" % target)
    v2, v3, zen2, avx512 = target["variants"]
    expect(v3["extra_weights_bytes"] > 0 and zen2["extra_weights_bytes"] == 0 and avx512["extra_weights_bytes"] > 0,
           "v3 and skylake-avx512 add weights, znver2 reads v3's: %s" % target["variants"])
    expect(target["checked_features"] == v2["checked_features"], "the header's minimum is v2's: %s" % target)
    expect_in("mlp_cpu_variant", manifest["interface"]["entry_points"], "the manifest's entry points")
    header = open(ctx.path("mlp.h")).read()
    expect_in('#define MLP_CPU "%s"' % cpus, header, "mlp.h")
    expect_in("#define MLP_CPU_VARIANTS 4", header, "mlp.h")
    with open(ctx.path("which.c"), "w") as f:
        f.write('#include <stdio.h>\n#include "mlp.h"\nint main(void) { printf("variant %d check %d\\n", '
                '(int)mlp_cpu_variant(), (int)mlp_check_cpu()); return 0; }\n')
    which = ctx.cc([ctx.path("which.c")], [ctx.path("mlp.o")], ctx.path("which"))
    for cpu, expected in (("Nehalem", "variant 0 check 0"), ("max", "variant 1 check 0"),
                          ("qemu64", "variant -1 check 9")):
        r = run_command(["qemu-x86_64", "-cpu", cpu, which], ctx.tmp, rc=0)
        expect_in(expected, r.stdout, "mlp_cpu_variant() under qemu -cpu " + cpu, r)
    r = run_command([which], ctx.tmp, rc=0)
    print("this machine: %s" % r.stdout.strip())
    # The harness on the emulated Nehalem (variant 0) and on this machine.
    iface = manifest["interface"]
    for tag, runner in (("nehalem", ["qemu-x86_64", "-cpu", "Nehalem"]), ("host", [])):
        job = Job(ctx, "mlp", iface, {d: 2 for d in iface["dims"]}, random.Random(SEED), tag)
        run_command(runner + [ctx.path("app")] + job.harness_args(), ctx.tmp, rc=0, timeout=300)
        job.check_against(ctx, ctx.example("mlp"), "mlp on %s" % tag)
    unsupported_cpu_run(ctx, "mlp", ["--cpu", cpus], "cc", ["qemu-x86_64", "-cpu", "qemu64"],
                        ["ssse3", "sse4.1", "sse4.2", "popcnt"], cpus.replace(",", ", "))
    # The same object at --jobs 1.
    one = ctx.mkdir("j1")
    ctx.compile(ctx.example("mlp"), one, "mlp", ["--cpu", cpus, "-j", "1"])
    expect(open(os.path.join(one, "mlp.o"), "rb").read() == open(ctx.path("mlp.o"), "rb").read(),
           "mlp.o differs between -j 1 and -j 2")


@case
def aarch64_under_qemu(ctx):
    """aarch64 objects of every example (the default CPU, generic, and
    neoverse-v1's SVE/BF16/I8MM features for mlp) linked with
    aarch64-linux-gnu-gcc run correctly under qemu-aarch64; the neoverse-v1
    object on a Cortex-A53 returns NAME_ERROR_UNSUPPORTED_CPU naming what the
    A53 lacks."""
    gcc = "aarch64-linux-gnu-gcc"
    require_tool(gcc, "link aarch64 programs")
    target = ["--target", "aarch64-linux-gnu"]
    for name, batches in (("mlp", [3]), ("cnn", [1]), ("gpt", [1])):
        manifest = compile_link_run(ctx, name, batches, target, gcc, qemu_aarch64())  # default CPU: generic
        expect(manifest["target"]["cpu"] == "generic" and manifest["target"]["checked_features"] == [],
               "aarch64's default CPU: %s" % manifest["target"])
    sub = ctx.mkdir("v1")
    ctx_v1 = Context(ctx.maxc, ctx.source_dir, sub)
    compile_link_run(ctx_v1, "mlp", [2], target + ["--cpu", "neoverse-v1"], gcc, qemu_aarch64())
    unsupported_cpu_run(ctx, "mlp", target + ["--cpu", "neoverse-v1"], gcc, qemu_aarch64("cortex-a53"),
                        ["lse", "fullfp16", "rdm", "jsconv", "complxnum", "rcpc", "dotprod", "sve",
                         "fp16fml", "flagm", "i8mm", "bf16"], "neoverse-v1")


def interface_of(ctx, name):
    """The interface from a manifest compiled for the example (for shapes and dims)."""
    _, manifest = ctx.compile(ctx.example(name), ctx.mkdir("iface-" + name), name, ["--emit", "manifest"])
    return manifest["interface"]


def run_on_device(ctx, device, models, extra=()):
    """`maxc run --device DEVICE [EXTRA...]` against `--device reference` on random inputs."""
    rng = random.Random(SEED)
    for name, batch in models:
        model = ctx.example(name)
        ctx.weights(name)
        iface = interface_of(ctx, name)
        job = Job(ctx, name, iface, {d: batch for d in iface["dims"]}, rng, name)
        cpu_dir, ref_dir = ctx.path(name + "." + device), ctx.path(name + ".reference")
        start = time.time()
        ctx.run(job.maxc_run_args(model, cpu_dir, device) + list(extra), rc=0)
        cpu_s = time.time() - start
        start = time.time()
        ctx.run(job.maxc_run_args(model, ref_dir, "reference"), rc=0)
        ref_s = time.time() - start
        print("%s batch %d: --device %s %.2f s, --device reference %.2f s" % (name, batch, device, cpu_s, ref_s))
        for spec in iface["outputs"]:
            d1, s1, got = read_npy(os.path.join(cpu_dir, spec["name"] + ".npy"))
            d2, s2, want = read_npy(os.path.join(ref_dir, spec["name"] + ".npy"))
            expect(d1 == d2 and s1 == s2, "%s: --device %s wrote %s %s, the reference %s %s"
                   % (spec["name"], device, d1, s1, d2, s2))
            worst = compare(got, want, "%s --device %s output %s" % (name, device, spec["name"]))
            print("%s %s: max abs diff %.3g, max rel diff %.3g" % (name, spec["name"], worst[0], worst[1]))


@case
def run_device_cpu(ctx):
    run_on_device(ctx, "cpu", [("mlp", 4), ("gpt", 2)])
    run_on_device(ctx, "cpu", [("gpt", 2)], ["--threads", "2"])  # the artifact's pool in the JIT


@case
def run_device_amdgpu_emu(ctx):
    """The GPU kernels of every example, executed by the host emulation."""
    run_on_device(ctx, "amdgpu-emu", [("mlp", 3), ("cnn", 1), ("gpt", 2)])


CUDA_STUB = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int cuInit(unsigned f) { return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuCtxGetDevice(int *d) { return 201; }
int cuDeviceGet(int *d, int o) { *d = o; return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) { *v = a == 75 ? 8 : 0; return 0; } /* compute capability 8.0 */
int cuDevicePrimaryCtxRetain(void **c, int d) { *c = (void *)0x1000; return 0; }
int cuDevicePrimaryCtxRelease_v2(int d) { fprintf(stderr, "stub: release\n"); return 0; }
int cuCtxSetCurrent(void *c) { return 0; }
int cuModuleLoadData(void **m, const void *image) {
  const char *t = strstr((const char *)image, ".target ");
  fprintf(stderr, "stub: load %.13s\n", t ? t : "?");
  *m = (void *)1; return 0;
}
int cuModuleGetFunction(void **f, void *m, const char *name) { *f = (void *)name; return 0; }
int cuModuleUnload(void *m) { return 0; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = (unsigned long long)calloc(1, n); return 0; }
int cuMemFree_v2(unsigned long long p) { free((void *)p); return 0; }
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) { memcpy((void *)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void *h, unsigned long long d, size_t n) { memcpy(h, (void *)d, n); return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned sh, void *st, void **params, void **extra) { fprintf(stderr, "stub: launch %s\n", (const char *)f); return 0; }
int cuStreamSynchronize(void *s) { return 0; }
int cuCtxSynchronize(void) { return 0; }
"""


@case
def run_device_cuda_stub(ctx):
    """`maxc run --device cuda` end to end against a stub libcuda.so.1 (no
    GPU here: the stub launches nothing): dlopen, the device's sm, the JIT's
    driver calls, copies in and out, cleanup. Without a driver: E0002."""
    require_tool("cc", "building the stub driver")
    model = ctx.example("mlp")
    ctx.weights("mlp")
    stub_dir = ctx.mkdir("cuda-stub")
    with open(os.path.join(stub_dir, "stub.c"), "w") as f:
        f.write(CUDA_STUB)
    run_command(["cc", "-shared", "-fPIC", "-o", os.path.join(stub_dir, "libcuda.so.1"),
                 os.path.join(stub_dir, "stub.c")], stub_dir, rc=0)
    write_npy_raw(ctx.path("x.npy"), "<f4", [2, 784], bytes(4 * 2 * 784))
    args = ["run", model, "--input", "x=" + ctx.path("x.npy"), "--output-dir", ctx.path("cuda-out"), "--device", "cuda"]
    env = dict(os.environ, LD_LIBRARY_PATH=stub_dir)
    r = subprocess.run([ctx.maxc] + args, cwd=ctx.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    expect(r.returncode == 0, "--device cuda with the stub driver failed: %s" % r.stderr)
    expect("stub: load .target sm_80" in r.stderr, "PTX for the device's sm_80: %s" % r.stderr)
    expect("stub: launch maxc_jit_main_k0" in r.stderr, "kernels launched by their PTX names: %s" % r.stderr)
    expect(r.stderr.rstrip().endswith("stub: release"), "context released last: %s" % r.stderr)
    _, shape, _ = read_npy(ctx.path("cuda-out", "logits.npy"))
    expect(shape == (2, 10), "logits shape %s" % (shape,))
    if not any(os.path.exists(p) for p in ["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1"]):
        r = ctx.run(args, rc=1)
        expect("error[E0302]: no CUDA driver" in r.stderr, "no-driver message", r)


GPU_ARCHES = ["gfx90a", "gfx942", "gfx1100"]

NO_DEVICE_PROGRAM = r"""
#include "%(name)s.h"
#include <stdio.h>
int main(void) {
  %(name)s_context *ctx = (%(name)s_context *)1;
  int32_t s = %(name)s_init(&ctx);
  printf("init: %%d (%%s)\n", (int)s, %(name)s_status_string(s));
  if (ctx != NULL) { printf("context not cleared\n"); return 1; }
  if (%(name)s_run_packed(NULL, NULL, NULL, NULL, NULL) != %(NAME)s_ERROR_NULL_POINTER) { printf("null ctx\n"); return 1; }
  %(name)s_destroy(NULL);
  return s == %(NAME)s_ERROR_NO_DEVICE ? 0 : 1;
}
"""


# The register budget every generated kernel keeps (docs/PERFORMANCE.md):
# no spills, at most 128 VGPRs (AGPRs apart), no scratch.
GPU_MAX_VGPRS = 128
# Kernel launches of one GPT forward (4 blocks): issue #13's bar 4*8+8 = 40;
# 31 now (7 per block + 3: the attention one fused kernel, docs/GPU.md); the
# f16 variant as built now (48: its attention fused too, with f32
# accumulation; its GEMM epilogues are kernels of their own; the casts to
# f32 for the norms are fused into the row kernels).
GPT_MAX_LAUNCHES = {"gpt": 31, "gpt16": 48}


def check_gpu_kernel_budget(name, arch_entry):
    """The manifest's per-kernel resources of one arch against the budget."""
    arch = arch_entry["arch"]
    for k in arch_entry["kernels"]:
        where = "%s %s %s" % (name, arch, k["name"])
        expect(k["vgpr_spill_count"] == 0 and k["sgpr_spill_count"] == 0, "%s spills: %s" % (where, k))
        expect(k["scratch_bytes"] == 0, "%s uses scratch: %s" % (where, k))
        vgprs = k["vgpr_count"] - k["agpr_count"] if arch in ("gfx90a", "gfx942") else k["vgpr_count"]
        expect(0 < vgprs <= GPU_MAX_VGPRS, "%s: %d VGPRs: %s" % (where, vgprs, k))
        expect(k["waves_per_simd"] >= 1, "%s: no occupancy: %s" % (where, k))
    if name in GPT_MAX_LAUNCHES:
        expect(arch_entry["launches"] <= GPT_MAX_LAUNCHES[name], "%s: %d launches per forward"
               % (name, arch_entry["launches"]))


@case
def gpu_f16_gpt_budget(ctx):
    """The GPT example with f16 weights (params and constants f16, so every
    activation is f16) keeps the kernel budget on every arch."""
    src = json.load(open(ctx.example("gpt")))
    src["name"], src["weights"] = "gpt16", "gpt16.safetensors"
    for module in src["modules"].values():
        for key, param in module.get("params", {}).items():
            param = param if isinstance(param, dict) else {"shape": param}
            param["dtype"] = "f16"
            module["params"][key] = param
        for stmt in module.get("body", []):
            for expr in stmt.values():
                if expr[0] == "full":
                    expr[1]["dtype"] = "f16"
    out = ctx.mkdir("gpu-gpt16")
    model = os.path.join(out, "model.json")
    with open(model, "w") as f:
        json.dump(src, f)
    ctx.run(["-q", "init-weights", model, "-o", os.path.join(out, "gpt16.safetensors"), "--seed", "1"], rc=0, cwd=out)
    ctx.run(["-q", "compile", model, "-o", os.path.join(out, "gpt16.o"), "--gpu", ",".join(GPU_ARCHES),
             "--emit", "manifest"], rc=0, cwd=out)
    manifest = json.load(open(os.path.join(out, "gpt16.manifest.json")))
    for g in manifest["gpu"]:
        check_gpu_kernel_budget("gpt16", g)
        print("gpt16 %s: %d kernels, %d launches, max %d VGPRs" % (
            g["arch"], len(g["kernels"]), g["launches"], max(k["vgpr_count"] for k in g["kernels"])))


# Division sequences in AMDGPU assembly: a 64-bit unsigned division or
# remainder by a value known only at run time expands to a float-reciprocal
# sequence that scales by 2^64 (0x5f7ffffc); a 32-bit one to
# v_rcp_iflag_f32. Divisions by constants are multiply-high sequences.
DIV64_MARKER = "0x5f7ffffc"
DIV32_MARKER = "v_rcp_iflag_f32"


@case
def gpu_index_math(ctx):
    """No kernel of mlp, cnn or gpt divides by a run-time value on gfx942:
    multi-indices never divide by their outermost dim (the dynamic batch),
    reshapes pass the dims they share with their input through, and a
    matmul with one batch entry takes its row tile without dividing by the
    (dynamic) tile count. Before: the GPT had one 64-bit and six 32-bit
    division sequences, the MLP three 32-bit ones."""
    for name in ["mlp", "cnn", "gpt"]:
        ctx.weights(name)
        out = ctx.mkdir("gpu-index-" + name)
        ctx.run(["-q", "compile", ctx.example(name), "-o", os.path.join(out, name + ".o"),
                 "--gpu", "gfx942", "--emit", "manifest,gpu-asm"], rc=0, cwd=out)
        asm = open(os.path.join(out, name + ".gfx942.s")).read()
        kernel, found = None, []
        for line in asm.splitlines():
            if line.endswith(":") and not line.startswith((".", "\t", " ")):
                kernel = line[:-1]
            if DIV64_MARKER in line or DIV32_MARKER in line:
                found.append("%s: %s" % (kernel, line.strip()))
        expect(not found, "%s: division by a run-time value in gfx942 kernels: %s" % (name, found))


# 64-bit address/index arithmetic in AMDGPU assembly: a 64-bit multiply-add
# (v_mad_u64_u32), a 64-bit shift (v_lshlrev_b64, element index to byte
# offset) and the high half of a 64-bit add (v_addc_co_u32).
INDEX64_MARKERS = ["v_mad_u64_u32", "v_lshlrev_b64", "v_addc_co_u32"]


def count_index64(asm_path):
    text = open(asm_path).read()
    return sum(len(re.findall(r"\b%s" % m, text)) for m in INDEX64_MARKERS)


def static_batch_example(ctx, name, out):
    """examples/NAME with its dynamic batch dim pinned to 1 (every shape
    static), weights from the example."""
    text = open(ctx.example(name)).read().replace('"batch"', "1")
    src = json.loads(text)
    src["weights"] = os.path.join(os.path.dirname(ctx.example(name)), src["weights"])
    model = os.path.join(out, "model.json")
    with open(model, "w") as f:
        json.dump(src, f)
    return model


# 64-bit index instructions on gfx942 with every shape static (batch 1), as
# compiled now (docs/PERFORMANCE.md, "GPU index math"). Before the work-item
# and workgroup ids carried their ranges: gpt 81 (29 v_mad_u64_u32, 48
# v_lshlrev_b64, 4 v_addc_co_u32), mlp 7. The dynamic-batch compile keeps
# the 64-bit path where its grid is not static (gpt 73, mlp 38). The GPT
# went 47 -> 51 (dynamic 73 -> 75) with fused attention: the attention
# kernel has 8 (QK^T, softmax and PV had 9), the out-projection reading the
# heads' merge view 14 (9 when PV stored through it).
GPU_STATIC_INDEX64_MAX = {"mlp": 9, "gpt": 51}


@case
def gpu_index32(ctx):
    """With static shapes below 2^31 bytes, kernels index in 32 bits: fewer
    64-bit multiply-adds, shifts and carries in the gfx942 assembly than
    the dynamic-batch compile of the same model, and the static model still
    equals the reference on the emulator."""
    rng = random.Random(SEED)
    for name in ["mlp", "gpt"]:
        ctx.weights(name)
        counts = {}
        for mode in ["dynamic", "static"]:
            out = ctx.mkdir("gpu-i32-%s-%s" % (name, mode))
            model = ctx.example(name) if mode == "dynamic" else static_batch_example(ctx, name, out)
            ctx.run(["-q", "compile", model, "-o", os.path.join(out, name + ".o"), "--gpu", "gfx942",
                     "--emit", "manifest,gpu-asm"], rc=0, cwd=out)
            counts[mode] = count_index64(os.path.join(out, name + ".gfx942.s"))
            for g in json.load(open(os.path.join(out, name + ".manifest.json")))["gpu"]:
                check_gpu_kernel_budget(name, g)
        print("%s gfx942 64-bit index instructions: dynamic %d, static %d" % (name, counts["dynamic"], counts["static"]))
        expect(counts["static"] <= GPU_STATIC_INDEX64_MAX[name],
               "%s: %d 64-bit index instructions with static shapes" % (name, counts["static"]))
        expect(counts["dynamic"] > counts["static"], "%s: dynamic batch lost its 64-bit path? %s" % (name, counts))
    # The static MLP on the emulator against the reference.
    out = ctx.mkdir("gpu-i32-run")
    model = static_batch_example(ctx, "mlp", out)
    iface = interface_of(ctx, "mlp")
    job = Job(ctx, "mlp", iface, {d: 1 for d in iface["dims"]}, rng, "mlp-static")
    emu_dir, ref_dir = ctx.path("mlp-static.emu"), ctx.path("mlp-static.reference")
    ctx.run(job.maxc_run_args(model, emu_dir, "amdgpu-emu"), rc=0)
    ctx.run(job.maxc_run_args(model, ref_dir, "reference"), rc=0)
    for spec in iface["outputs"]:
        _, _, got = read_npy(os.path.join(emu_dir, spec["name"] + ".npy"))
        _, _, want = read_npy(os.path.join(ref_dir, spec["name"] + ".npy"))
        compare(got, want, "static mlp --device amdgpu-emu output " + spec["name"])


@case
def gpu_artifact(ctx):
    """--gpu: a HSACO per arch (valid AMDGPU ELF with amdhsa notes naming the
    manifest's kernels, disassembles for its arch) in a host object that links
    with -lamdhip64 and, with no GPU here, returns the no-device status."""
    require_tool("llvm-readelf-19", "reading the HSACO notes")
    require_tool("llvm-objdump-19", "disassembling the HSACO")
    for name in ["mlp", "cnn", "gpt"]:
        ctx.weights(name)
        out = ctx.mkdir("gpu-" + name)
        ctx.run(["-q", "compile", ctx.example(name), "-o", os.path.join(out, name + ".o"),
                 "--gpu", ",".join(GPU_ARCHES), "--emit", "obj,header,manifest,hsaco"], rc=0, cwd=out)
        manifest = json.load(open(os.path.join(out, name + ".manifest.json")))
        expect([g["arch"] for g in manifest["gpu"]] == GPU_ARCHES, "manifest arches %s" % manifest["gpu"])
        for g in manifest["gpu"]:
            hsaco = os.path.join(out, "%s.%s.hsaco" % (name, g["arch"]))
            expect(sha256_file(hsaco) == g["hsaco_sha256"], "%s: manifest hash differs" % hsaco)
            notes = run_command(["llvm-readelf-19", "--notes", hsaco], out, rc=0).stdout
            expect("amdhsa.target:   amdgcn-amd-amdhsa--" + g["arch"] in notes, "%s: no amdhsa.target" % hsaco)
            for k in g["kernels"]:
                expect(".name:           " + k["name"] + "\n" in notes, "%s: kernel %s not in the notes"
                       % (hsaco, k["name"]))
                expect(k.get("vgpr_count", 0) > 0 and k.get("sgpr_count", 0) > 0,
                       "%s: no register counts for %s in the manifest: %s" % (name, k["name"], k))
            check_gpu_kernel_budget(name, g)
            dis = run_command(["llvm-objdump-19", "-d", "--mcpu=" + g["arch"], hsaco], out, rc=0).stdout
            expect("s_endpgm" in dis, "%s: no kernel code in the disassembly" % hsaco)
            print("%s %s: %d kernels, %d bytes" % (name, g["arch"], len(g["kernels"]), g["hsaco_bytes"]))
        if name == "gpt":
            expect(manifest["subgraphs"]["definitions"] == 1, "gpt: %s" % manifest["subgraphs"])
        src = os.path.join(out, "app.c")
        with open(src, "w") as f:
            f.write(NO_DEVICE_PROGRAM % {"name": name, "NAME": name.upper()})
        app = os.path.join(out, "app")
        run_command(["cc", "-I", out, src, os.path.join(out, name + ".o"), "-lamdhip64", "-o", app], out, rc=0)
        r = run_command([app], out, rc=0)
        print(r.stdout.strip())
    # Byte-identical recompiles, hsaco included.
    again = ctx.mkdir("gpu-mlp-again")
    ctx.run(["-q", "compile", ctx.example("mlp"), "-o", os.path.join(again, "mlp.o"),
             "--gpu", ",".join(GPU_ARCHES), "--emit", "obj,header,manifest,hsaco"], rc=0, cwd=again)
    for f in listing(again):
        expect(open(os.path.join(again, f), "rb").read() == open(os.path.join(ctx.path("gpu-mlp"), f), "rb").read(),
               "%s differs between two GPU compiles" % f)
    # Bad names fail before LLVM, with the valid list, and write nothing.
    bad = ctx.mkdir("gpu-bad")
    r = ctx.run(["compile", ctx.example("mlp"), "-o", os.path.join(bad, "mlp.o"), "--gpu", "gfx9999"], rc=1, cwd=bad)
    expect("unknown AMD GPU architecture 'gfx9999'" in r.stderr and "gfx942" in r.stderr, "bad --gpu message", r)
    r = ctx.run(["compile", ctx.example("mlp"), "-o", os.path.join(bad, "mlp.o"), "--gpu", "mi300x",
                 "--code-object-version", "3"], rc=1, cwd=bad)
    expect("code object version" in r.stderr, "bad --code-object-version message", r)
    expect(listing(bad) == [], "a failed GPU compile left %s" % listing(bad))


@case
def two_models_one_program(ctx):
    """Two compiled models in one C program: no clashing symbols or macros."""
    models = {}
    objects = []
    for name in ["mlp", "cnn"]:
        ctx.weights(name)
        obj, manifest = ctx.compile(ctx.example(name), ctx.tmp, name)
        expect(manifest["name"] == name, "manifest name %r, expected %r" % (manifest["name"], name))
        models[name] = manifest["interface"]
        objects.append(obj)
    app = ctx.cc([write_harness(ctx, models)], objects, ctx.path("app"))
    rng = random.Random(SEED)
    jobs = [Job(ctx, "mlp", models["mlp"], {"batch": 3}, rng, "mlp"),
            Job(ctx, "cnn", models["cnn"], {"batch": 2}, rng, "cnn")]
    # One process runs both models, interleaved: mlp, cnn, then mlp again.
    again = Job(ctx, "mlp", models["mlp"], {"batch": 1}, rng, "mlp2")
    run_command([app] + jobs[0].harness_args() + jobs[1].harness_args() + again.harness_args(), ctx.tmp, rc=0)
    for job in jobs + [again]:
        job.check_against(ctx, ctx.example(job.name), "%s in a two-model program (%s)" % (job.name, job.tag))


@case
def threads_pool(ctx):
    """NAME_set_num_threads: two models in one program, each on its own pool of 2 threads, at sizes
    whose kernels split into tasks; outputs match the reference and are the same bits as on 1 thread."""
    models, objects = {}, []
    for name in ["mlp", "cnn"]:
        ctx.weights(name)
        obj, manifest = ctx.compile(ctx.example(name), ctx.tmp, name)
        models[name] = manifest["interface"]
        objects.append(obj)
    app = ctx.cc([write_harness(ctx, models)], objects, ctx.path("app"))
    rng = random.Random(SEED)
    jobs = [Job(ctx, "mlp", models["mlp"], {"batch": 64}, rng, "mlp"),
            Job(ctx, "cnn", models["cnn"], {"batch": 4}, rng, "cnn")]
    args = jobs[0].harness_args() + jobs[1].harness_args()
    run_command([app, "--threads", "1"] + args, ctx.tmp, rc=0)
    one = {p: open(p, "rb").read() for job in jobs for _, _, p in job.outputs}
    for threads in ["2", "3"]:
        run_command([app, "--threads", threads] + args, ctx.tmp, rc=0)
        for p in one:
            expect(open(p, "rb").read() == one[p], "%s: %s threads and 1 thread give different bits" % (p, threads))
    for job in jobs:
        job.check_against(ctx, ctx.example(job.name), "%s on the artifact's pool" % job.name)


@case
def determinism(ctx):
    ctx.weights("gpt")
    emit = ["--emit", "obj,header,manifest,asm,llvm-ir"]
    a, b = ctx.mkdir("a"), ctx.mkdir("b")
    start = time.time()
    ctx.run(["-q", "compile", ctx.example("gpt"), "-o", os.path.join(a, "gpt.o")] + emit, rc=0, cwd=a)
    first_s = time.time() - start
    start = time.time()
    r = ctx.run(["compile", ctx.example("gpt"), "-o", os.path.join(b, "gpt.o"), "--verify-reproducible"] + emit,
                rc=0, cwd=b)
    second_s = time.time() - start
    print("compile %.2f s; with --verify-reproducible %.2f s" % (first_s, second_s))
    expect("error" not in r.stderr, "--verify-reproducible reported a problem", r)
    expected = ["gpt.h", "gpt.ll", "gpt.manifest.json", "gpt.o", "gpt.s"]
    expect(listing(a) == expected, "first compile wrote %s, expected %s" % (listing(a), expected))
    expect(listing(b) == expected, "second compile wrote %s, expected %s" % (listing(b), expected))
    for f in expected:
        da = open(os.path.join(a, f), "rb").read()
        db = open(os.path.join(b, f), "rb").read()
        if da != db:
            first = next(i for i in range(min(len(da), len(db)) + 1) if i == min(len(da), len(db)) or da[i] != db[i])
            raise Failure("%s differs between two compiles (%d vs %d bytes, first difference at byte %d)"
                          % (f, len(da), len(db), first))
        expect(len(da) > 0, "%s is empty" % f)


@case
def weights_first_object(ctx):
    """The object with embedded weights is laid out weights-first (ELF header,
    weights, section table, LLVM's sections; extended section numbering) so
    that the weights are written during code generation (CPU, AMDGPU and
    CUDA host objects: "weights (overlapped)" in --time-passes): readelf and
    llvm-objdump accept it, the weights section starts right after the ELF
    header, and a program links against it (compile-link-run-* run it)."""
    readelf = require_tool("llvm-readelf-19", "list the sections of the object")
    objdump = require_tool("llvm-objdump-19", "list the sections of the object")
    ctx.weights("gpt")
    out = ctx.mkdir("out")
    for mode, extra in [("cpu", []), ("gpu", ["--gpu", "gfx942"]), ("cuda", ["--gpu", "sm_80"])]:
        obj = os.path.join(out, mode + ".o")
        r = ctx.run(["compile", ctx.example("gpt"), "-o", obj, "--name", "gpt_" + mode, "--time-passes"] + extra,
                    rc=0)
        expect_in("weights (overlapped)", r.stdout + r.stderr, "%s: --time-passes (written during codegen)" % mode, r)
        r = run_command([readelf, "-S", "-W", obj], ctx.tmp, rc=0)
        expect("warning" not in r.stderr.lower(), "%s: llvm-readelf warned" % mode, r)
        m = re.search(r"\.rodata\.maxc\.weights\s+PROGBITS\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", r.stdout)
        expect(m is not None, "%s: no weights section" % mode, r)
        expect(int(m.group(1), 16) == 64, "%s: the weights start at %s, not right after the ELF header"
               % (mode, m.group(1)), r)
        expect(int(m.group(2), 16) > 1 << 20, "%s: the weights section holds %s bytes" % (mode, m.group(2)), r)
        r = run_command([objdump, "-h", obj], ctx.tmp, rc=0)
        expect_in(".rodata.maxc.weights", r.stdout, "llvm-objdump -h", r)
        expect_in(".text", r.stdout, "llvm-objdump -h", r)
        if shutil.which("readelf"):  # GNU binutils, where installed
            r = run_command(["readelf", "-S", "-W", obj], ctx.tmp, rc=0)
            expect("warning" not in r.stderr.lower(), "%s: GNU readelf warned" % mode, r)
            expect_in(".rodata.maxc.weights", r.stdout, "GNU readelf -S", r)


@case
def output_directory_checked_first(ctx):
    """An output directory that is missing, not a directory, or (for the
    depfile, -MF) missing is refused in `validate`, before the model is even
    read: the same error[E0407] the write step would give after the whole
    backend, exit 1, nothing written."""
    ctx.weights("gpt")
    a_file = ctx.path("a_file")
    with open(a_file, "w") as f:
        f.write("not a directory")
    missing = ctx.path("missing")
    cases = [(["-o", os.path.join(missing, "gpt.o")], "cannot create a file in %s: No such file or directory" % missing),
             (["-o", os.path.join(a_file, "gpt.o")], "cannot create a file in %s: Not a directory" % a_file),
             (["-o", ctx.path("gpt.o"), "-MF", os.path.join(missing, "gpt.d")],
              "cannot create a file in %s: No such file or directory" % missing)]
    for args, message in cases:
        # The model does not exist: only a check before `load` reports the output.
        r = ctx.run(["compile", ctx.path("no-such-model.json")] + args, rc=1)
        expect_in("error[E0407]: " + message, r.stderr, "stderr", r)
        # A real model: refused before any step after validate ran.
        r = ctx.run(["compile", ctx.example("gpt"), "--time-passes"] + args, rc=1)
        expect_in("error[E0407]: " + message, r.stderr, "stderr", r)
        steps = [line.split()[0] for line in (r.stdout + r.stderr).splitlines() if line.startswith("  ")]
        expect(steps == ["validate", "total"], "the compile ran on after validate: %s" % steps, r)
    expect(not os.path.exists(missing) and sorted(os.listdir(ctx.tmp)).count("gpt.o") == 0,
           "something was written")
    # /dev/null and a plain directory still work.
    ctx.run(["compile", ctx.example("mlp"), "-o", "/dev/null", "--emit", "obj"], rc=0)


@case
def failed_while_writing_weights(ctx):
    """The weights are written on a second thread while the backend generates
    code. A backend error then (a generic AMD GPU arch needs code object
    version 6: found while compiling the arch) cancels that write, and a write
    error (the file size limit, as a full disk) fails the compile: exit 1,
    the previous outputs intact, no temp file left."""
    import resource
    import signal
    ctx.weights("gpt")
    out = ctx.mkdir("out")
    obj = os.path.join(out, "gpt.o")
    old = {"gpt.o": b"old object", "gpt.h": b"old header", "gpt.weights.bin": b"old weights"}

    def reset():
        for f in listing(out):
            os.unlink(os.path.join(out, f))
        for f, data in old.items():
            with open(os.path.join(out, f), "wb") as w:
                w.write(data)

    def unchanged(r, what):
        expect(listing(out) == sorted(old), "%s: the output dir holds %s" % (what, listing(out)), r)
        for f, data in old.items():
            with open(os.path.join(out, f), "rb") as g:
                expect(g.read() == data, "%s: %s was replaced" % (what, f), r)

    reset()
    r = ctx.run(["compile", ctx.example("gpt"), "-o", obj, "--gpu", "gfx9-generic", "--code-object-version", "5",
                 "--time-passes"], rc=1)
    expect_in("needs code object version 6", r.stderr, "stderr", r)
    expect_in("weights (cancelled)", r.stdout + r.stderr, "--time-passes (the weights were being written)", r)
    unchanged(r, "a backend error during the weights' write")

    # A write that fails while the backend works: at most 1 MiB per file (the
    # external weights are ~13 MB; SIGXFSZ ignored, so write() fails EFBIG).
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    for extra in [["--weights-mode", "external"], []]:
        reset()
        cmd = [ctx.maxc, "compile", ctx.example("gpt"), "-o", obj] + extra
        p = subprocess.run(cmd, cwd=ctx.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit,
                           timeout=120)
        p.cmd, p.stdout, p.stderr = cmd, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        expect(p.returncode == 1, "a write over the file size limit should fail the compile", p)
        expect_in("cannot write", p.stderr, "stderr", p)
        expect("internal" not in p.stderr, "a write error is not an internal error", p)
        unchanged(p, "a failed write of the weights %s" % " ".join(extra))


@case
def aarch64_cross(ctx):
    readelf = require_tool("llvm-readelf-19", "read the ELF header of the cross-compiled object")
    nm = require_tool("llvm-nm-19", "list the symbols of the cross-compiled object")
    objdump = require_tool("llvm-objdump-19", "disassemble the cross-compiled object")
    ctx.weights("mlp")
    for cpu in ["generic", ""]:
        out = ctx.mkdir("cpu-" + (cpu or "empty"))
        obj = os.path.join(out, "mlp.o")
        ctx.run(["-q", "compile", ctx.example("mlp"), "-o", obj, "--target", "aarch64-linux-gnu", "--cpu", cpu], rc=0)
        r = run_command([readelf, "-h", obj], ctx.tmp, rc=0)
        expect(re.search(r"^\s*Machine:\s+AArch64\s*$", r.stdout, re.M) is not None,
               "--cpu %r: the object is not AArch64" % cpu, r)
        expect(re.search(r"^\s*Class:\s+ELF64\s*$", r.stdout, re.M) is not None, "expected ELF64", r)
        expect(re.search(r"^\s*Type:\s+REL\b", r.stdout, re.M) is not None, "expected a relocatable object", r)
        r = run_command([nm, "--defined-only", obj], ctx.tmp, rc=0)
        for symbol in ["mlp_run", "mlp_run_packed", "mlp_workspace_size", "mlp_status_string"]:
            expect(re.search(r"^[0-9a-f]+ T %s$" % symbol, r.stdout, re.M) is not None,
                   "--cpu %r: no global function %s" % (cpu, symbol), r)
        r = run_command([objdump, "-d", obj], ctx.tmp, rc=0)
        expect_in("elf64-littleaarch64", r.stdout, "llvm-objdump -d", r)
        expect(re.search(r"^[0-9a-f]+ <mlp_run>:", r.stdout, re.M) is not None, "no mlp_run in the disassembly", r)
        with open(os.path.join(out, "mlp.manifest.json")) as f:
            target = json.load(f)["target"]
        expect(target.get("triple", "").startswith("aarch64"), "manifest target is %s" % target)
        print("--cpu %r: %s, cpu %s" % (cpu, target.get("triple"), target.get("cpu")))


def text_size(ctx, obj):
    size = require_tool("llvm-size-19", "measure the .text section")
    r = run_command([size, "-A", obj], ctx.tmp, rc=0)
    m = re.search(r"^\.text\s+(\d+)\s", r.stdout, re.M)
    expect(m is not None, "no .text section in %s" % obj, r)
    return int(m.group(1))


@case
def text_size_flat(ctx):
    """Code size does not grow with the number of repeated layers.

    Subgraph dedup compiles the GPT Block once, so .text of a 24-layer GPT
    must stay within 10 % of a 2-layer one. The margin is thin: the Block
    function itself is the same size at 2 and 24 layers, but every call site
    in <name>.graph.main fills its own pointer table (FunctionEmitter::
    emit_call, lib/Codegen/Cpu/KernelEmitter.cpp), about 225 bytes of x86 code
    per layer, so the result depends on the Block's size: +8.9 % to +11.1 %
    at 24 layers across the builds of 2026-12-02 (.text 44.4-55.6 kB)."""
    require_tool("llvm-size-19", "measure the .text section")
    generate = os.path.join(ctx.source_dir, "examples", "gpt", "generate.py")
    sizes, times = {}, {}
    for layers in [2, 24]:
        d = ctx.mkdir("gpt%d" % layers)
        model = os.path.join(d, "model.json")
        run_command([sys.executable, generate, "--layers", str(layers), "-o", model], ctx.tmp, rc=0)
        with open(model) as f:
            weights = json.load(f).get("weights", "gpt.safetensors")
        ctx.run(["-q", "init-weights", model, "-o", os.path.join(d, weights), "--seed", "1"], rc=0)
        start = time.time()
        r = ctx.run(["compile", model, "-o", os.path.join(d, "gpt.o"), "--time-passes"], rc=0)
        times[layers] = time.time() - start
        sizes[layers] = text_size(ctx, os.path.join(d, "gpt.o"))
        print("%d layers: .text %d bytes, compile %.2f s" % (layers, sizes[layers], times[layers]))
        print("  " + "\n  ".join(l for l in r.stderr.splitlines() if l.strip()))
    growth = (sizes[24] - sizes[2]) / sizes[2]
    print(".text 24 vs 2 layers: %+.1f %%; compile time ratio %.2f" % (100 * growth, times[24] / times[2]))
    expect(abs(growth) <= 0.10, ".text is %d bytes with 24 layers and %d with 2 (%+.1f %%): more than 10 %% apart"
           % (sizes[24], sizes[2], 100 * growth))


@case
def bad_target(ctx):
    model = ctx.example("mlp")
    ctx.weights("mlp")
    out = ctx.mkdir("out")
    obj = os.path.join(out, "mlp.o")

    def nothing_written(r, what):
        expect(listing(out) == [], "%s left files behind: %s" % (what, listing(out)), r)
        expect(listing(ctx.tmp) == ["out"], "%s wrote outside the output dir: %s" % (what, listing(ctx.tmp)), r)

    # An unknown CPU: exit 1, the valid CPU names listed, nothing written.
    r = ctx.run(["compile", model, "-o", obj, "--cpu", "znver99"], rc=1)
    expect_in("znver99", r.stderr, "stderr", r)
    for cpu in ["znver4", "x86-64-v3", "skylake-avx512"]:
        expect_in(cpu, r.stderr, "the list of valid CPUs", r)
    expect("internal" not in r.stderr, "a bad --cpu is an input error", r)
    nothing_written(r, "--cpu znver99")
    # An x86 CPU for aarch64: the aarch64 names are listed.
    r = ctx.run(["compile", model, "-o", obj, "--target", "aarch64-linux-gnu", "--cpu", "znver4"], rc=1)
    expect_in("cortex-a53", r.stderr, "the list of valid aarch64 CPUs", r)
    nothing_written(r, "--target aarch64-linux-gnu --cpu znver4")
    # Bad --cpu lists: an empty name, a CPU twice, two CPUs the run-time
    # check cannot tell apart, --profile with several.
    for cpus, message in (("x86-64-v3,", "empty CPU name"), ("znver4,znver4", "names znver4 twice"),
                          ("portable,x86-64-v3", "names x86-64-v3 twice"),
                          ("x86-64-v3,znver99", "unknown CPU 'znver99'")):
        r = ctx.run(["compile", model, "-o", obj, "--cpu", cpus], rc=1)
        expect_in(message, r.stderr, "stderr of --cpu %s" % cpus, r)
        nothing_written(r, "--cpu " + cpus)
    r = ctx.run(["compile", model, "-o", obj, "--cpu", "x86-64-v3,znver4", "--profile"], rc=1)
    expect_in("--profile takes one CPU", r.stderr, "stderr of --profile with two CPUs", r)
    nothing_written(r, "--profile with two CPUs")
    # An unsupported triple: the accepted ones are listed.
    r = ctx.run(["compile", model, "-o", obj, "--target", "riscv64-linux-gnu"], rc=1)
    expect_in("riscv64-linux-gnu", r.stderr, "stderr", r)
    for triple in ["x86_64-linux-gnu", "aarch64-linux-gnu"]:
        expect_in(triple, r.stderr, "the list of accepted targets", r)
    nothing_written(r, "--target riscv64-linux-gnu")
    # --print-outputs lists what would be written, and writes nothing.
    r = ctx.run(["compile", model, "-o", obj, "--print-outputs"], rc=0)
    expect(r.stdout.splitlines() == [obj, os.path.join(out, "mlp.h"), os.path.join(out, "mlp.manifest.json")],
           "--print-outputs should list the object, header and manifest", r)
    nothing_written(r, "--print-outputs")
    r = ctx.run(["compile", model, "-o", obj, "--name", "net", "--print-outputs",
                 "--emit", "obj,header,manifest,asm,llvm-ir,graph"], rc=0)
    expected = [obj] + [os.path.join(out, "net" + ext) for ext in [".h", ".manifest.json", ".s", ".ll", ".graph.json"]]
    expect(r.stdout.splitlines() == expected, "--print-outputs should list %s" % expected, r)
    nothing_written(r, "--print-outputs --emit ...")
    # -o into a directory that does not exist: exit 1, nothing written.
    missing = ctx.path("missing")
    r = ctx.run(["compile", model, "-o", os.path.join(missing, "mlp.o")], rc=1)
    expect_in("E0407", r.stderr, "stderr", r)
    expect(not os.path.exists(missing), "-o created the missing directory", r)
    nothing_written(r, "-o missing/mlp.o")


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_manifest(ctx, name, out, emitted, extra=()):
    model = ctx.example(name)
    ctx.run(["-q", "compile", model, "-o", os.path.join(out, name + ".o")] + list(extra), rc=0)
    path = os.path.join(out, name + ".manifest.json")
    with open(path) as f:
        text = f.read()
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise Failure("%s is not valid JSON: %s" % (path, e))
    expect(manifest.get("name") == name, "manifest name is %r, expected %r" % (manifest.get("name"), name))
    target = manifest.get("target")
    expect(isinstance(target, dict) and isinstance(target.get("triple"), str) and target["triple"].startswith("x86_64"),
           "manifest target should name the x86_64 triple: %s" % target)
    expect(isinstance(target.get("cpu"), str) and target["cpu"], "manifest target should name the CPU: %s" % target)
    # The interface matches the model's declared inputs and outputs.
    with open(model) as f:
        doc = json.load(f)
    iface = manifest.get("interface", {})
    inputs, outputs = iface.get("inputs"), iface.get("outputs")
    expect(isinstance(inputs, list) and isinstance(outputs, list), "interface needs inputs and outputs: %s" % iface)
    expect([(t.get("name"), t.get("dtype"), t.get("shape")) for t in inputs] ==
           [(t["name"], t["dtype"], t["shape"]) for t in doc["inputs"]],
           "interface inputs %s do not match the model's %s" % (inputs, doc["inputs"]))
    expect([t.get("name") for t in outputs] == doc["outputs"],
           "interface outputs %s do not match the model's %s" % ([t.get("name") for t in outputs], doc["outputs"]))
    for t in outputs:
        expect(isinstance(t.get("shape"), list) and t["shape"] and
               all(isinstance(d, int) or isinstance(d, str) and d in iface.get("dims", []) for d in t["shape"]),
               "output %s has no usable shape: %s" % (t.get("name"), t))
        expect(isinstance(t.get("dtype"), str), "output %s has no dtype" % t.get("name"))
    expect("%s_run" % name in iface.get("entry_points", []), "entry_points should list %s_run" % name)
    # Every written artifact but the manifest itself is listed with its hash.
    listed = manifest.get("outputs")
    expect(isinstance(listed, list), "manifest has no outputs list")
    files = sorted(os.path.basename(p) for p in emitted if not p.endswith(".manifest.json"))
    expect(sorted(o.get("path") for o in listed) == files,
           "manifest outputs %s, expected %s" % (sorted(o.get("path") for o in listed), files))
    expect(listing(out) == sorted(os.path.basename(p) for p in emitted),
           "compile wrote %s, expected %s" % (listing(out), sorted(os.path.basename(p) for p in emitted)))
    for o in listed:
        written = os.path.join(out, o["path"])
        expect(o.get("sha256") == sha256_file(written), "outputs[%s].sha256 is %s, the file's is %s"
               % (o["path"], o.get("sha256"), sha256_file(written)))
        expect(o.get("bytes") == os.path.getsize(written), "outputs[%s].bytes is %s, the file has %d"
               % (o["path"], o.get("bytes"), os.path.getsize(written)))
    # The inputs: model and weights, hashed too.
    roles = {i.get("role"): i for i in manifest.get("inputs", [])}
    for role, file in [("model", model), ("weights", ctx.weights(name))]:
        expect(role in roles, "manifest inputs have no %s: %s" % (role, manifest.get("inputs")))
        expect(roles[role].get("sha256") == sha256_file(file), "inputs[%s].sha256 does not match %s" % (role, file))
    print("%s: %d outputs hashed, interface %s -> %s" % (
        name, len(listed), [t["shape"] for t in inputs], [t["shape"] for t in outputs]))


@case
def manifest(ctx):
    ctx.weights("mlp")
    ctx.weights("cnn")
    out = ctx.mkdir("mlp")
    check_manifest(ctx, "mlp", out, [os.path.join(out, f) for f in
                                     ["mlp.o", "mlp.h", "mlp.manifest.json", "mlp.s", "mlp.ll", "mlp.graph.json"]],
                   ["--emit", "obj,header,manifest,asm,llvm-ir,graph"])
    out = ctx.mkdir("cnn")
    check_manifest(ctx, "cnn", out, [os.path.join(out, f) for f in ["cnn.o", "cnn.h", "cnn.manifest.json"]])


def status_program(name, iface, batch):
    """A C program checking NULL pointers, status strings and the caller-provided workspace."""
    check_interface(iface)
    upper = name.upper()
    dims = iface["dims"]
    lines = [C_PRELUDE, '#include "%s.h"\n' % name,
             "#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, \"FAILED %s: \", #cond); "
             "fprintf(stderr, __VA_ARGS__); fprintf(stderr, \"\\n\"); ++failures; } } while (0)",
             "int main(void) {", "  int failures = 0;"]
    for d in dims:
        lines.append("  int64_t d_%s = %d;" % (d, batch))
    args = []
    for i, t in enumerate(iface["inputs"]):
        ctype = dtype_info(t["dtype"])[0]
        lines.append("  size_t n_in%d = %s;" % (i, c_count(t["shape"])))
        lines.append("  %s *in%d = (%s *)alloc_poisoned(n_in%d * sizeof(%s));" % (ctype, i, ctype, i, ctype))
        if t["dtype"].startswith("f"):
            fill = "(%s)(((k * 37) %% 101) / 50.0 - 1.0)" % ctype
        else:
            fill = "(%s)((k * 7) %% 1024)" % ctype  # token ids
        lines.append("  for (size_t k = 0; k < n_in%d; ++k) in%d[k] = %s;" % (i, i, fill))
        args.append("in%d" % i)
    for i, t in enumerate(iface["outputs"]):
        ctype = dtype_info(t["dtype"])[0]
        lines.append("  size_t n_out%d = %s;" % (i, c_count(t["shape"])))
        for copy in ["a", "b", "c"]:
            lines.append("  %s *out%d_%s = (%s *)alloc_poisoned(n_out%d * sizeof(%s));"
                         % (ctype, i, copy, ctype, i, ctype))
    dim_args = ["d_%s" % d for d in dims]

    def call(inputs, outs, ws, dvals=None):
        return "%s_run(%s)" % (name, ", ".join(inputs + outs + (dvals or dim_args) + [ws]))

    outs_a = ["out%d_a" % i for i in range(len(iface["outputs"]))]
    # A NULL input (each in turn) and a NULL output: status 1 (NAME_ERROR_NULL_POINTER).
    lines.append("  CHECK(%s_ERROR_NULL_POINTER == 1, \"the header's null-pointer status is %%d\", "
                 "(int)%s_ERROR_NULL_POINTER);" % (upper, upper))
    for i in range(len(args)):
        with_null = args[:i] + ["NULL"] + args[i + 1:]
        lines.append("  { int32_t s = %s; CHECK(s == 1, \"NULL input %d gave status %%d\", (int)s); }"
                     % (call(with_null, outs_a, "NULL"), i))
    for i in range(len(outs_a)):
        with_null = outs_a[:i] + ["NULL"] + outs_a[i + 1:]
        lines.append("  { int32_t s = %s; CHECK(s == 1, \"NULL output %d gave status %%d\", (int)s); }"
                     % (call(args, with_null, "NULL"), i))
    # Status strings: non-empty for every documented code, and for an unknown one not NULL.
    lines.append("  { const char *m = %s_status_string(1); CHECK(m != NULL && m[0] != 0, \"empty message for 1\");"
                 " if (m) printf(\"status 1: %%s\\n\", m); }" % name)
    for code in ["%s_OK" % upper, "%s_ERROR_NULL_POINTER" % upper, "%s_ERROR_INVALID_DIM" % upper,
                 "%s_ERROR_OUT_OF_MEMORY" % upper]:
        lines.append("  { const char *m = %s_status_string(%s); CHECK(m != NULL && m[0] != 0, \"empty message for "
                     "%s\"); }" % (name, code, code))
    lines.append("  { const char *m = %s_status_string(12345); CHECK(m != NULL, \"NULL message for an unknown code\"); }"
                 % name)
    # A negative dim: NAME_ERROR_INVALID_DIM.
    if dims:
        bad = ["(int64_t)-1"] + dim_args[1:]
        lines.append("  { int32_t s = %s; CHECK(s == %s_ERROR_INVALID_DIM, \"dim -1 gave status %%d\", (int)s); }"
                     % (call(args, outs_a, "NULL", bad), upper))
    # Workspace: a positive size; a caller-provided buffer gives the same bits as NULL,
    # also when reused for a second call.
    lines.append("  int64_t ws_bytes = %s_workspace_size(%s);" % (name, ", ".join(dim_args)))
    lines.append("  printf(\"workspace_size = %\" PRId64 \"\\n\", ws_bytes);")
    lines.append("  CHECK(ws_bytes > 0, \"workspace size %\" PRId64, ws_bytes);")
    lines.append("  if (ws_bytes <= 0) return 1;")
    lines.append("  CHECK(ws_bytes % 64 == 0, \"workspace size %\" PRId64 \" is not a multiple of 64\", ws_bytes);")
    lines.append("  void *ws = alloc_workspace(ws_bytes);")
    for copy, ws in [("a", "NULL"), ("b", "ws"), ("c", "ws")]:
        outs = ["out%d_%s" % (i, copy) for i in range(len(iface["outputs"]))]
        lines.append("  { int32_t s = %s; CHECK(s == %s_OK, \"run %s gave status %%d (%%s)\", (int)s, "
                     "%s_status_string(s)); }" % (call(args, outs, ws), upper, copy, name))
    for i, t in enumerate(iface["outputs"]):
        ctype = dtype_info(t["dtype"])[0]
        bytes_ = "n_out%d * sizeof(%s)" % (i, ctype)
        lines.append("  CHECK(memcmp(out%d_a, out%d_b, %s) == 0, \"output %d differs with a caller workspace\");"
                     % (i, i, bytes_, i))
        lines.append("  CHECK(memcmp(out%d_a, out%d_c, %s) == 0, \"output %d differs with a reused workspace\");"
                     % (i, i, bytes_, i))
        if t["dtype"].startswith("f"):
            lines.append("  { size_t bad = 0; for (size_t k = 0; k < n_out%d; ++k) if (!(out%d_a[k] == out%d_a[k])) "
                         "++bad; CHECK(bad == 0, \"%%zu NaN elements in output %d\", bad); }" % (i, i, i, i))
        lines.append("  write_all(\"%s.out%d.bin\", out%d_a, %s);" % (name, i, i, bytes_))
    lines.append("  free(ws);")
    lines.append("  if (failures == 0) printf(\"ok\\n\");")
    lines.append("  return failures ? 1 : 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


@case
def null_and_status(ctx):
    for name, batch in [("mlp", 3), ("gpt", 1)]:
        ctx.weights(name)
        obj, manifest = ctx.compile(ctx.example(name), ctx.tmp, name)
        source = ctx.path("%s_status.c" % name)
        with open(source, "w") as f:
            f.write(status_program(name, manifest["interface"], batch))
        app = ctx.cc([source], [obj], ctx.path("%s_status" % name))
        r = run_command([app], ctx.tmp)
        expect(r.returncode == 0 and r.stdout.splitlines()[-1:] == ["ok"],
               "%s: the status/workspace checks failed (see stderr)" % name, r)
        print("%s: %s" % (name, " | ".join(r.stdout.splitlines())))


EXTERNAL_WEIGHTS_PROGRAM = r"""
#include "ext.h"
#include "emb.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  FILE *f = fopen(argv[1], "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", argv[1]); return 1; }
  unsigned char *w = aligned_alloc(64, (EXT_WEIGHTS_BYTES + 63) / 64 * 64);
  if (fread(w, 1, EXT_WEIGHTS_BYTES, f) != EXT_WEIGHTS_BYTES) { fprintf(stderr, "short read\n"); return 1; }
  fclose(f);
  static float x[3 * 784], y1[3 * 10], y2[3 * 10];
  for (int i = 0; i < 3 * 784; ++i) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
  int s = ext_run(x, y1, 3, NULL);
  if (s != EXT_ERROR_WEIGHTS_NOT_SET) { fprintf(stderr, "run before set_weights: status %d\n", s); return 1; }
  if (ext_set_weights(w, EXT_WEIGHTS_BYTES - 4) != EXT_ERROR_WEIGHTS_MISMATCH) { fprintf(stderr, "size\n"); return 1; }
  /* A changed byte is refused: in each of the checksum's 8 lanes (word k of
     a 64-byte block), low and high byte, and in the tail (the last size %
     64 bytes, when there are any). */
  size_t changed[24], n = 0;
  for (int k = 0; k < 8; ++k) {
    changed[n++] = 64 * 37 + 8 * k;
    changed[n++] = 64 * 1001 + 8 * k + 7;
  }
  for (size_t i = EXT_WEIGHTS_BYTES / 64 * 64; i < EXT_WEIGHTS_BYTES && n < 20; i += 13)
    changed[n++] = i;
  changed[n++] = EXT_WEIGHTS_BYTES - 1;
  for (size_t i = 0; i < n; ++i) {
    w[changed[i]] ^= 0x81;
    if (ext_set_weights(w, EXT_WEIGHTS_BYTES) != EXT_ERROR_WEIGHTS_MISMATCH) {
      fprintf(stderr, "checksum: byte %zu changed, not refused\n", changed[i]);
      return 1;
    }
    w[changed[i]] ^= 0x81;
  }
  if ((s = ext_set_weights(w, EXT_WEIGHTS_BYTES)) != EXT_OK) { fprintf(stderr, "set: %s\n", ext_status_string(s)); return 1; }
  if ((s = ext_run(x, y1, 3, NULL)) != EXT_OK) { fprintf(stderr, "run: %s\n", ext_status_string(s)); return 1; }
  if ((s = emb_run(x, y2, 3, NULL)) != EMB_OK) { fprintf(stderr, "emb: %s\n", emb_status_string(s)); return 1; }
  if (memcmp(y1, y2, sizeof y1) != 0) { fprintf(stderr, "external and embedded weights disagree\n"); return 1; }
  printf("ok\n");
  return 0;
}
"""


@case
def external_weights(ctx):
    """--weights-mode external: the object holds no weights; NAME.weights.bin is
    checked (size, alignment, hash) by NAME_set_weights, a run before it fails
    with status 4, and results equal the embedded build bit for bit."""
    ctx.weights("mlp")
    ext_obj, manifest = ctx.compile(ctx.example("mlp"), ctx.tmp, "ext", ["--weights-mode", "external"])
    emb_obj, _ = ctx.compile(ctx.example("mlp"), ctx.tmp, "emb")
    blob = ctx.path("ext.weights.bin")
    expect(os.path.exists(blob), "ext.weights.bin was not written")
    expect(manifest["memory"]["weights_mode"] == "external", "manifest weights_mode")
    expect(os.path.getsize(ext_obj) < os.path.getsize(emb_obj) // 10, "the external object still holds the weights")
    outputs = {o["role"]: o for o in manifest["outputs"]}
    with open(blob, "rb") as f:
        expect(outputs["weights"]["sha256"] == hashlib.sha256(f.read()).hexdigest(), "weights sha256 in the manifest")
    source = ctx.path("external.c")
    with open(source, "w") as f:
        f.write(EXTERNAL_WEIGHTS_PROGRAM)
    app = ctx.cc([source], [ext_obj, emb_obj], ctx.path("external"))
    r = run_command([app, blob], ctx.tmp)
    expect(r.returncode == 0 and r.stdout.strip() == "ok", "external weights program failed", r)


TAIL_MODEL = {
    "maxc": 1, "name": "tail", "weights": "tail.safetensors",
    "inputs": [{"name": "x", "dtype": "f32", "shape": ["n", 8]}],
    "outputs": ["y"],
    "modules": {"Linear": {"args": ["x"], "options": {"in": 8, "out": 5},
                           "params": {"weight": ["$out", "$in"], "bias": ["$out"]},
                           "body": [{"y": ["linear", "x", "@weight", "@bias"]}], "return": "y"},
                "Shift": {"args": ["x"], "params": {"b": [5]},
                          "body": [{"y": ["add", "x", "@b"]}], "return": "y"}},
    "main": [{"h": ["call", "Linear", "x", {"instance": "fc"}]}, {"h": ["tanh", "h"]},
             {"y": ["call", "Shift", "h", {"instance": "zshift"}]}]
}

TAIL_PROGRAM = r"""
#include "tail.h"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 1;
  unsigned char *w = aligned_alloc(64, (TAIL_WEIGHTS_BYTES + 63) / 64 * 64);
  if (fread(w, 1, TAIL_WEIGHTS_BYTES, f) != TAIL_WEIGHTS_BYTES) { fprintf(stderr, "short read\n"); return 1; }
  fclose(f);
  for (size_t i = 0; i < TAIL_WEIGHTS_BYTES; ++i) /* every lane of every block, every tail byte */
    for (int bit = 0; bit < 8; bit += 7) {
      w[i] ^= (unsigned char)(1u << bit);
      if (tail_set_weights(w, TAIL_WEIGHTS_BYTES) != TAIL_ERROR_WEIGHTS_MISMATCH) {
        fprintf(stderr, "byte %zu bit %d changed, not refused\n", i, bit);
        return 1;
      }
      w[i] ^= (unsigned char)(1u << bit);
    }
  int s = tail_set_weights(w, TAIL_WEIGHTS_BYTES);
  if (s != TAIL_OK) { fprintf(stderr, "set: %s\n", tail_status_string(s)); return 1; }
  printf("ok %llu\n", (unsigned long long)TAIL_WEIGHTS_BYTES);
  return 0;
}
"""


@case
def external_weights_checksum(ctx):
    """NAME_set_weights' lanes64 checksum in generated code: a blob whose size
    is no multiple of 64 (whole blocks and a tail) is taken unchanged, and
    refused with any one bit changed (low or high bit of every byte: each
    lane of each block, each tail byte)."""
    model = ctx.path("tail.json")
    with open(model, "w") as f:
        json.dump(TAIL_MODEL, f)
    ctx.run(["-q", "init-weights", model, "-o", ctx.path("tail.safetensors"), "--seed", "5"], rc=0)
    out = ctx.mkdir("tail")
    obj, manifest = ctx.compile(model, out, "tail", ["--weights-mode", "external"])
    size = manifest["memory"]["weights_blob_bytes"]
    expect(size % 64 != 0 and size > 64, "the blob is %d bytes: no whole block and tail to check" % size)
    shutil.copy(os.path.join(out, "tail.h"), ctx.path("tail.h"))
    source = ctx.path("tail.c")
    with open(source, "w") as f:
        f.write(TAIL_PROGRAM)
    app = ctx.cc([source], [obj], ctx.path("tail_app"))
    r = run_command([app, os.path.join(out, "tail.weights.bin")], ctx.tmp)
    expect(r.returncode == 0 and r.stdout.startswith("ok"), "the checksum program failed", r)
    print(r.stdout.strip())


WINOGRAD_MODEL = {
    "maxc": 1,
    "name": "wino",
    "weights": "wino.safetensors",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 32, 7, 6]}],
    "outputs": ["y"],
    "modules": {
        "Block": {
            "args": ["x"],
            "subgraph": True,
            "params": {"w": [32, 32, 3, 3], "b": [32]},
            "body": [
                {"y": ["conv2d", "x", "@w", "@b", {"padding": [1, 1, 1, 1]}]},
                {"y": ["relu", "y"]},
                {"y": ["add", "y", "x"]}
            ],
            "return": "y"
        }
    },
    "main": [
        {"x": ["call", "Stem", "x", {"instance": "stem"}]},
        {"x": ["call", "Block", "x", {"instance": "b1"}]},
        {"y": ["call", "Block", "x", {"instance": "b2"}]}
    ]
}
WINOGRAD_MODEL["modules"]["Stem"] = {
    "args": ["x"],
    "params": {"w": [32, 32, 3, 3]},
    "body": [{"y": ["conv2d", "x", "@w", {"padding": [1, 1, 1, 1]}]}],
    "return": "y"
}


@case
def winograd_weights(ctx):
    """Static-shape 3x3 convs lowered to Winograd F(2,3) (a conv and a block called
    twice with its own weights): the transformed weights go where the other
    weights go (the object's weights section, or NAME.weights.bin with
    --weights-mode external, never the external object), in place of the
    original weights (no kernel reads those), and both builds
    equal the reference interpreter and each other bit for bit."""
    model = ctx.path("wino.json")
    with open(model, "w") as f:
        json.dump(WINOGRAD_MODEL, f)
    ctx.run(["-q", "init-weights", model, "-o", ctx.path("wino.safetensors"), "--seed", "3"], rc=0)
    emb_dir, ext_dir = ctx.mkdir("emb"), ctx.mkdir("ext")
    emb_obj, manifest = ctx.compile(model, emb_dir, "wino", ["--emit", "obj,header,manifest,llvm-ir"])
    with open(os.path.join(emb_dir, "wino.ll")) as f:
        ir = f.read()
    expect("winograd_out" in ir and "wino.graph.sub.Block" in ir,
           "the convs did not take the Winograd kernel, or Block is no subgraph")
    ext_obj, _ = ctx.compile(model, ext_dir, "wino", ["--weights-mode", "external"])
    blob = os.path.join(ext_dir, "wino.weights.bin")
    # Each conv weight is read by Winograd convs only: stored once,
    # transformed (16/9 of the original's bytes), the original values not at
    # all; plus the two biases and 64-byte alignment.
    winograd_bytes = 3 * 32 * 32 * 9 * 4 * 16 // 9
    blob_bytes = os.path.getsize(blob)
    expect(winograd_bytes <= blob_bytes <= winograd_bytes + 2 * 32 * 4 + 6 * 64,
           "wino.weights.bin holds %d bytes, not the transformed weights (%d) and the biases only"
           % (blob_bytes, winograd_bytes))
    expect(os.path.getsize(ext_obj) < winograd_bytes // 2,
           "the external object holds weights (%d bytes)" % os.path.getsize(ext_obj))
    # Embedded build vs the reference interpreter.
    iface = manifest["interface"]
    shutil.copy(os.path.join(emb_dir, "wino.h"), ctx.path("wino.h"))
    app = ctx.cc([write_harness(ctx, {"wino": iface})], [emb_obj], ctx.path("app"))
    job = Job(ctx, "wino", iface, {}, random.Random(SEED), "b2")
    run_command([app] + job.harness_args(), ctx.tmp, rc=0)
    job.check_against(ctx, model, "wino batch 2")
    # External build: the same bits as the embedded one.
    source = ctx.path("wino_ext.c")
    with open(source, "w") as f:
        f.write(EXTERNAL_WEIGHTS_PROGRAM.replace("3 * 784", "2 * 32 * 7 * 6").replace("3 * 10", "2 * 32 * 7 * 6")
                .replace(", 3, NULL", ", NULL").replace("EXT_", "WINO_EXT_").replace("EMB_", "WINO_EMB_")
                .replace("ext_", "wino_ext_").replace("emb_", "wino_emb_")
                .replace('"ext.h"', '"ext/wino_ext.h"').replace('"emb.h"', '"emb/wino_emb.h"'))
    ext_c, _ = ctx.compile(model, ext_dir, "wino_ext", ["--weights-mode", "external"])
    emb_c, _ = ctx.compile(model, emb_dir, "wino_emb")
    app = ctx.cc([source], [ext_c, emb_c], ctx.path("wino_ext"))
    r = run_command([app, os.path.join(ext_dir, "wino_ext.weights.bin")], ctx.tmp)
    expect(r.returncode == 0 and r.stdout.strip() == "ok", "external Winograd weights program failed", r)


def run_against_reference(ctx, model, name, out_dir, iface, dims):
    """Links OUT_DIR/NAME.o into a harness, runs it on random inputs at
    `dims` and compares the outputs with the reference interpreter's."""
    shutil.copy(os.path.join(out_dir, name + ".h"), ctx.path(name + ".h"))
    app = ctx.cc([write_harness(ctx, {name: iface})], [os.path.join(out_dir, name + ".o")], ctx.path("app"))
    tag = "".join("%s%d" % (k[0], v) for k, v in sorted(dims.items()))
    job = Job(ctx, name, iface, dims, random.Random(SEED), tag)
    run_command([app] + job.harness_args(), ctx.tmp, rc=0)
    job.check_against(ctx, model, "%s %s" % (name, " ".join("%s %d" % kv for kv in sorted(dims.items()))))


def add_digests(digests, out_dir, key):
    """Records the sha256 of every file in `out_dir` under digests[name][key]."""
    for name in sorted(os.listdir(out_dir)):
        digests.setdefault(name, {})[key] = sha256_file(os.path.join(out_dir, name))


def expect_same_bytes(digests, keys, what):
    """Every artifact in `digests` was written for each of `keys`, the same bytes each time."""
    for name, by_key in sorted(digests.items()):
        expect(len(set(by_key.values())) == 1 and sorted(by_key) == sorted(keys), "%s differs between %s %s: %s"
               % (name, what, ", ".join(keys), by_key))


# Three subgraph definitions (Up, Down, Norm), each called twice or more:
# four CPU partitions (the root and one per definition).
JOBS_MODEL = {
    "maxc": 1,
    "name": "jobs",
    "weights": "jobs.safetensors",
    "inputs": [{"name": "x", "dtype": "f32", "shape": ["batch", 16]}],
    "outputs": ["y"],
    "modules": {
        "Up": {"args": ["x"], "subgraph": True, "params": {"w": [32, 16], "b": [32]},
               "body": [{"y": ["linear", "x", "@w", "@b"]}, {"y": ["gelu", "y"]}], "return": "y"},
        "Down": {"args": ["x"], "subgraph": True, "params": {"w": [16, 32]},
                 "body": [{"y": ["linear", "x", "@w"]}, {"y": ["tanh", "y"]}], "return": "y"},
        "Norm": {"args": ["x"], "subgraph": True, "params": {"g": {"shape": [16], "init": "ones"}},
                 "body": [{"y": ["rms_norm", "x", "@g", {"eps": 1e-5}]}], "return": "y"},
    },
    "main": [
        {"h": ["call", "Up", "x", {"instance": "u1"}]},
        {"h": ["call", "Down", "h", {"instance": "d1"}]},
        {"h": ["call", "Norm", "h", {"instance": "n1"}]},
        {"h": ["call", "Up", "h", {"instance": "u2"}]},
        {"h": ["call", "Down", "h", {"instance": "d2"}]},
        {"y": ["call", "Norm", "h", {"instance": "n2"}]},
    ],
}


@case
def jobs_byte_identical(ctx):
    """compile --jobs N: the partitions (the root, one per subgraph definition)
    are code-generated on N threads and joined in a fixed order, so every
    artifact (object, header, manifest, assembly, IR) is the same bytes for
    -j 1, 2 and 3, and the object still matches the reference interpreter."""
    model = ctx.path("jobs.json")
    with open(model, "w") as f:
        json.dump(JOBS_MODEL, f)
    ctx.run(["-q", "init-weights", model, "-o", ctx.path("jobs.safetensors"), "--seed", "5"], rc=0)
    digests = {}
    for jobs in ["1", "2", "3"]:
        out = ctx.mkdir("j" + jobs)
        _, manifest = ctx.compile(model, out, "jobs", ["--jobs", jobs, "--emit", "obj,header,manifest,asm,llvm-ir"])
        expect(manifest["subgraphs"]["definitions"] == 3, "expected 3 definitions: %s" % manifest["subgraphs"])
        add_digests(digests, out, jobs)
    expect_same_bytes(digests, ["1", "2", "3"], "--jobs")
    print("same bytes for -j 1, 2, 3: %s" % ", ".join(sorted(digests)))
    with open(ctx.path("j2", "jobs.ll")) as f:
        ir = f.read()
    for sub in ["Up", "Down", "Norm"]:
        expect(re.search(r"^define hidden void @jobs\.graph\.sub\.%s[.\d]*\(" % sub, ir, re.M) is not None,
               "no definition of the %s subgraph's function in the joined IR" % sub)
    run_against_reference(ctx, model, "jobs", ctx.path("j2"), manifest["interface"], {"batch": 3})


def flat_model(layers=24):
    """A model without subgraphs: `layers` linear layers of different widths,
    each with another activation, so the root's module is one big partition
    (about 35,000 IR instructions at 24 layers: split in pieces)."""
    params, body, prev, cur = {}, [], 32, "x"
    acts = ["gelu", "tanh", "relu", "sigmoid", "silu"]
    for i in range(layers):
        width = 56 + 8 * ((i * 5) % 10)
        params["w%d" % i], params["b%d" % i] = [width, prev], [width]
        body += [{"h%d" % i: ["linear", cur, "@w%d" % i, "@b%d" % i]}, {"h%d" % i: [acts[i % 5], "h%d" % i]}]
        cur, prev = "h%d" % i, width
    body.append({"y": ["softmax", cur, {"axis": -1}]})
    return {"maxc": 1, "name": "flat", "weights": "flat.safetensors",
            "inputs": [{"name": "x", "dtype": "f32", "shape": ["batch", 32]}], "outputs": ["y"],
            "modules": {"Net": {"args": ["x"], "params": params, "body": body, "return": "y"}},
            "main": [{"y": ["call", "Net", "x", {"instance": "net"}]}]}


@case
def split_module_byte_identical(ctx):
    """A big partition (here the root of a model without subgraphs) is split
    into pieces by its size (Codegen/ModuleSplit.h), each optimized and
    emitted on one of --jobs threads: the artifacts are the same bytes for
    -j 1 and 2, the object's symbols keep the model's prefix, and the object
    matches the reference interpreter."""
    model = ctx.path("flat.json")
    with open(model, "w") as f:
        json.dump(flat_model(), f)
    ctx.run(["-q", "init-weights", model, "-o", ctx.path("flat.safetensors"), "--seed", "7"], rc=0)
    digests = {}
    for jobs in ["1", "2"]:
        out = ctx.mkdir("j" + jobs)
        if jobs == "1":  # -v: the partitions' log says how the root was split
            r = ctx.run(["-v", "compile", model, "-o", os.path.join(out, "flat.o"), "--name", "flat", "--jobs", jobs,
                         "--emit", "obj,header,manifest,asm,llvm-ir"], rc=0)
            pieces = re.search(r"partition 0 \(flat, \d+ instructions\): codegen [\d.]+ ms, split in (\d+) pieces",
                               r.stderr)
            expect(pieces is not None and int(pieces.group(1)) >= 2, "the root was not split: %s" % r.stderr[-2000:])
        else:
            _, manifest = ctx.compile(model, out, "flat", ["--jobs", jobs, "--emit", "obj,header,manifest,asm,llvm-ir"])
        add_digests(digests, out, jobs)
    expect_same_bytes(digests, ["1", "2"], "--jobs")
    print("root split in %s pieces; same bytes for -j 1, 2: %s" % (pieces.group(1), ", ".join(sorted(digests))))
    nm = require_tool("nm", "list the object's symbols")
    symbols = run_command([nm, "-g", "--defined-only", ctx.path("j2", "flat.o")], ctx.tmp, rc=0).stdout.split()
    names = [s for s in symbols if not re.fullmatch(r"[0-9a-fA-F]+|[A-Za-z]", s)]
    stray = [s for s in names if not s.startswith("flat")]
    expect(not stray, "global symbols without the model's prefix: %s" % stray[:10])
    run_against_reference(ctx, model, "flat", ctx.path("j2"), manifest["interface"], {"batch": 5})


@case
def jobs_gpu_byte_identical(ctx):
    """compile --gpu with two arches (AMD: HSACO each; NVIDIA: PTX each): each
    arch's code on its own thread with -j 2, the same artifacts as -j 1."""
    ctx.weights("mlp")
    for gpu, emit, per_arch in [("gfx90a,gfx942", "hsaco", ["mlp.gfx90a.hsaco", "mlp.gfx942.hsaco"]),
                                ("sm_80,sm_90", "ptx", ["mlp.sm_80.ptx", "mlp.sm_90.ptx"])]:
        digests = {}
        for jobs in ["1", "2"]:
            out = ctx.mkdir(gpu.replace(",", "-"), "j" + jobs)
            ctx.compile(ctx.example("mlp"), out, "mlp", ["--gpu", gpu, "--cpu", "x86-64", "-j", jobs,
                                                         "--emit", "obj,header,manifest," + emit])
            for name in sorted(os.listdir(out)):
                with open(os.path.join(out, name), "rb") as f:
                    digests.setdefault(name, set()).add(hashlib.sha256(f.read()).hexdigest())
        expect(all(a in digests for a in per_arch), "--gpu %s artifacts: %s" % (gpu, sorted(digests)))
        for name, seen in sorted(digests.items()):
            expect(len(seen) == 1, "--gpu %s: %s differs between -j 1 and -j 2" % (gpu, name))
        print("--gpu %s: same bytes for -j 1, 2: %s" % (gpu, ", ".join(sorted(digests))))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--maxc", help="the maxc binary (required unless --list)")
    parser.add_argument("--source-dir", help="the maxc source tree, for examples/ (required unless --list)")
    parser.add_argument("--keep", action="store_true", help="keep each case's temporary directory (for debugging)")
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
        tmp = tempfile.mkdtemp(prefix="maxc-e2e-")
        start = time.time()
        try:
            CASES[name](Context(maxc, source_dir, tmp))
            print("PASS %s (%.1f s)" % (name, time.time() - start))
        except Failure as e:
            print("FAIL %s (%.1f s)\n%s" % (name, time.time() - start, e))
            doc = CASES[name].__doc__
            if doc and "Fails with" in doc:
                print("\n(known maxc bug, see the case's docstring:)\n" + doc.strip())
            failed.append(name)
        finally:
            if args.keep:
                print("kept %s" % tmp)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        sys.stdout.flush()
    if len(names) > 1:
        print("%d/%d passed%s" % (len(names) - len(failed), len(names),
                                  "; failed: " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
