#!/usr/bin/env python3
"""The Llama example's model written out in numpy (float64), independently of
maxc: greedy generation by re-running the whole sequence each step.

    examples/llama/numpy_reference.py MODEL.json WEIGHTS.safetensors PROMPT N

PROMPT: comma-separated token ids. Prints the N generated tokens on one
line. The end-to-end test compares maxc's tokens with these; a mismatch
means the model file, the importer or a kernel computes something other
than this model (RMSNorm, rotate-half RoPE, grouped-query causal attention,
SwiGLU).
"""

import json
import struct
import sys

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit("%s: %s is %s, expected F32" % (path, name, info["dtype"]))
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=np.float32).reshape(info["shape"])
    return out


class Llama:
    def __init__(self, model_path, weights_path):
        with open(model_path) as f:
            model = json.load(f)
        opts = model["modules"]["Block"]["options"]
        self.heads, self.kv_heads, self.hd = opts["heads"], opts["kvh"], opts["hd"]
        self.w = {k: v.astype(np.float64) for k, v in load_safetensors(weights_path).items()}
        self.layers = sum(1 for k in self.w if k.endswith(".attention.wq.weight"))
        # The attention's bool-mask fill, as the model file says.
        self.fill = next(s["o"][-1].get("fill", 0.0) for s in model["modules"]["Block"]["body"]
                         if "o" in s and s["o"][0] == "attention")

    @staticmethod
    def rms_norm(x, w, eps=1e-5):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(self, x, positions):
        half = self.hd // 2
        inv_freq = np.exp(np.arange(half) * (-2.0 * np.log(10000.0) / self.hd))
        angles = positions[:, None] * inv_freq
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def logits(self, tokens):
        w, n, hd = self.w, len(tokens), self.hd
        x = w["tok_embeddings.weight"][tokens]
        positions = np.arange(n, dtype=np.float64)
        causal = np.tril(np.ones((n, n), bool))
        for i in range(self.layers):
            p = "layers.%d." % i
            h = self.rms_norm(x, w[p + "attention_norm.weight"])
            q = (h @ w[p + "attention.wq.weight"].T).reshape(n, self.heads, hd)
            k = (h @ w[p + "attention.wk.weight"].T).reshape(n, self.kv_heads, hd)
            v = (h @ w[p + "attention.wv.weight"].T).reshape(n, self.kv_heads, hd)
            q, k = self.rope(q, positions), self.rope(k, positions)
            group = self.heads // self.kv_heads  # query head j reads k/v head j // group
            k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
            scores = np.einsum("mhd,shd->hms", q, k) / np.sqrt(hd)
            scores = np.where(causal, scores, self.fill)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            o = np.einsum("hms,shd->mhd", scores, v).reshape(n, -1)
            x = x + o @ w[p + "attention.wo.weight"].T
            h = self.rms_norm(x, w[p + "ffn_norm.weight"])
            g, u = h @ w[p + "feed_forward.w1.weight"].T, h @ w[p + "feed_forward.w3.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "feed_forward.w2.weight"].T
        return self.rms_norm(x, w["norm.weight"]) @ w["output.weight"].T

    def generate(self, prompt, n):
        sequence, out = list(prompt), []
        for _ in range(n):
            token = int(np.argmax(self.logits(sequence)[-1]))
            out.append(token)
            sequence.append(token)
        return out


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    model = Llama(argv[1], argv[2])
    print(" ".join(map(str, model.generate([int(t) for t in argv[3].split(",")], int(argv[4])))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
