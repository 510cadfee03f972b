#!/usr/bin/env python3
"""Static check of the GPU GEMM kernels (no device needed): compiles the
examples for gfx90a, gfx942 and gfx1100 with --emit gpu-asm and prints, per
example and arch, the matmul/conv2d kernels' matrix instructions, the most
VGPRs/AGPRs any of them uses, their spills and LDS, and the number of 128-bit
global loads.

    bench/gpu_matmul_static.py [build/bin/maxc] [examples...]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ARCHES = ["gfx90a", "gfx942", "gfx1100"]


def kernels(asm):
    """name -> {field: value} from the amdhsa.kernels metadata of a .s file."""
    meta = asm[asm.find("amdhsa.kernels:"):]
    out = {}
    for entry in re.split(r"\n  - ", meta)[1:]:
        fields = dict(re.findall(r"\.(\w+):\s+(\S+)", entry))
        if "name" in fields:
            out[fields["name"]] = fields
    return out


def bodies(asm, names):
    """name -> instruction text of each kernel (up to the next kernel's label)."""
    starts = sorted((m.start(), m.group(1)) for m in re.finditer(r"^([\w.]+):$", asm, re.M) if m.group(1) in names)
    return {name: asm[pos:(starts[i + 1][0] if i + 1 < len(starts) else len(asm))]
            for i, (pos, name) in enumerate(starts)}


def main():
    maxc = sys.argv[1] if len(sys.argv) > 1 else "build/bin/maxc"
    examples = sys.argv[2:] or ["mlp", "cnn", "gpt"]
    print("| example | arch | GEMM kernels | instruction | max VGPR | max AGPR | spills | LDS B | 128-bit loads |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for ex in examples:
            out = os.path.join(tmp, ex)
            subprocess.run([maxc, "compile", f"examples/{ex}/model.json", "--gpu", ",".join(ARCHES),
                            "--emit", "obj,manifest,gpu-asm", "-o", out], check=True, capture_output=True)
            manifest = json.load(open(out + ".manifest.json"))
            gemm = {k["name"]: k for k in manifest["gpu"][0]["kernels"] if k["kind"] in ("matmul", "conv2d")}
            for arch in ARCHES:
                asm = open(f"{out}.{arch}.s").read()
                meta = kernels(asm)
                text = bodies(asm, meta)
                names = [n for n in gemm if n in meta]
                ops = set()
                loads = 0
                for n in names:
                    ops |= set(re.findall(r"\b(v_mfma_\w+|v_wmma_\w+)", text.get(n, "")))
                    loads += len(re.findall(r"global_load_(?:dwordx4|b128)", text.get(n, "")))
                field = lambda f: max((int(meta[n].get(f, 0)) for n in names), default=0)
                spills = sum(int(meta[n].get("vgpr_spill_count", 0)) + int(meta[n].get("sgpr_spill_count", 0))
                             for n in names)
                print(f"| {ex} | {arch} | {len(names)} | {', '.join(sorted(ops)) or 'scalar (4x4 per work-item)'} "
                      f"| {field('vgpr_count')} | {field('agpr_count')} | {spills} "
                      f"| {field('group_segment_fixed_size')} | {loads} |")


if __name__ == "__main__":
    main()
