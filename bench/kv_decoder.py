#!/usr/bin/python3
"""An LLM decoder with a KV cache, exported the way HF/optimum-style exports look (torch
1.13, opset 14): inputs tokens[1, seq] and past_k_i / past_v_i[1, kv_heads, past, head_dim]
per layer; outputs logits[1, seq, vocab] and present_k_i / present_v_i[1, kv_heads,
past+seq, head_dim]. Positions are arange(seq) + past inside the graph (past read from
past_k_0's shape), RoPE from those positions, grouped-query attention through
expand+reshape (HF's repeat_kv), a causal mask over past+seq keys built from aranges,
RMSNorm spelled out, SwiGLU. `seq` and `past` are symbolic (dynamic axes).

    /usr/bin/python3 bench/kv_decoder.py [--layers 2 --d 128 --heads 4 --kv-heads 2 --ff 344
                                          --vocab 512 --out kv_decoder]

Writes OUT.onnx (by default 2 layers, d 128, 4 heads, 2 kv heads, vocab 512) into the
current directory, and OUT_io.npz: a 7-token prefill and 3 greedy steps as torch ran them
(inputs and outputs per step), to check a runtime against. Random weights, or with
`--train STEPS --text FILE [--lr 2e-3]` weights trained on FILE's bytes (teacher forcing, Adam; the
prefill is then FILE's first 7 bytes): a model whose greedy tokens have margins, for
judging weight quantization (issue 25's int4 bar). Not a test
dependency: the issue-23 corpus model (docs/PERFORMANCE.md; bench/kv_decode_bench.py times
decode steps of a larger one against ONNX Runtime)."""
import argparse, math, numpy as np, torch, torch.nn as nn, torch.nn.functional as F
ap = argparse.ArgumentParser()
for flag, default in [("layers", 2), ("d", 128), ("heads", 4), ("kv-heads", 2), ("ff", 344), ("vocab", 512)]:
    ap.add_argument("--" + flag, type=int, default=default)
ap.add_argument("--out", default="kv_decoder")
ap.add_argument("--train", type=int, default=0, metavar="STEPS",
                help="train STEPS Adam steps on --text (byte tokens) before exporting")
ap.add_argument("--lr", type=float, default=2e-3, help="--train's Adam learning rate")
ap.add_argument("--text", help="the training text (a file; its bytes are the tokens, vocab >= 256)")
args = ap.parse_args()
torch.manual_seed(0)
D, H, KVH, FF, V, L = args.d, args.heads, args.kv_heads, args.ff, args.vocab, args.layers
HD = D // H

class RMSNorm(nn.Module):
    def __init__(s, d, eps=1e-6): super().__init__(); s.w = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d)); s.eps = eps
    def forward(s, x): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps) * s.w

def rotate(x): return torch.cat((-x[..., HD // 2:], x[..., :HD // 2]), dim=-1)

class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.n1 = RMSNorm(D); s.n2 = RMSNorm(D)
        s.q = nn.Linear(D, D, bias=False); s.k = nn.Linear(D, KVH * HD, bias=False)
        s.v = nn.Linear(D, KVH * HD, bias=False); s.o = nn.Linear(D, D, bias=False)
        s.g = nn.Linear(D, FF, bias=False); s.u = nn.Linear(D, FF, bias=False); s.dn = nn.Linear(FF, D, bias=False)
    def forward(s, x, cos, sin, mask, pk, pv):
        B, T, _ = x.shape; y = s.n1(x)
        q = s.q(y).view(B, T, H, HD).transpose(1, 2)
        k = s.k(y).view(B, T, KVH, HD).transpose(1, 2); v = s.v(y).view(B, T, KVH, HD).transpose(1, 2)
        q = q * cos + rotate(q) * sin; k = k * cos + rotate(k) * sin
        k = torch.cat((pk, k), dim=2); v = torch.cat((pv, v), dim=2)
        present = (k, v)
        S = k.shape[2]
        k = k[:, :, None].expand(B, KVH, H // KVH, S, HD).reshape(B, H, S, HD)
        v = v[:, :, None].expand(B, KVH, H // KVH, S, HD).reshape(B, H, S, HD)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(HD) + mask, dim=-1) @ v
        x = x + s.o(a.transpose(1, 2).reshape(B, T, D))
        y = s.n2(x)
        return x + s.dn(F.silu(s.g(y)) * s.u(y)), present

class Decoder(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(V, D); s.blocks = nn.ModuleList([Block() for _ in range(L)])
        s.nf = RMSNorm(D); s.head = nn.Linear(D, V, bias=False)
        s.register_buffer('inv', 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD)))
    def forward(s, tokens, *past):
        T = tokens.shape[1]; P = past[0].shape[2]
        pos = torch.arange(T) + P
        f = pos[:, None].float() * s.inv[None, :]
        e = torch.cat((f, f), dim=-1); cos, sin = e.cos(), e.sin()
        keys = torch.arange(P + T)
        mask = torch.where(keys[None, :] > pos[:, None], torch.tensor(-1e9), torch.tensor(0.0))
        x = s.emb(tokens); presents = []
        for i, b in enumerate(s.blocks):
            x, (k, v) = b(x, cos, sin, mask, past[2 * i], past[2 * i + 1]); presents += [k, v]
        return (s.head(s.nf(x)),) + tuple(presents)

m = Decoder()
if args.train:
    # Teacher forcing on random 64-byte windows of the text, batch 8: a model
    # with real margins between its top logits (a random one has almost none,
    # so any weight rounding changes its greedy tokens: docs/PERFORMANCE.md).
    assert args.text and V >= 256, "--train needs --text and --vocab >= 256"
    data = torch.tensor(list(open(args.text, "rb").read()), dtype=torch.long)
    opt = torch.optim.Adam(m.parameters(), lr=args.lr)
    empty_train = [torch.zeros(8, KVH, 0, HD) for _ in range(2 * L)]
    g = torch.Generator().manual_seed(1)
    for step in range(args.train):
        at = torch.randint(0, len(data) - 65, (8,), generator=g)
        batch = torch.stack([data[i:i + 65] for i in at])
        logits = m(batch[:, :-1], *empty_train)[0]
        loss = F.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 25 == 0 or step == args.train - 1:
            print("step %d loss %.3f" % (step, loss.item()), flush=True)
m = m.eval()
names = [f"past_{kv}_{i}" for i in range(L) for kv in "kv"]
outs = ["logits"] + [f"present_{kv}_{i}" for i in range(L) for kv in "kv"]
tokens = torch.randint(0, V, (1, 7)) if not args.train else data[:7][None, :]
empty = [torch.zeros(1, KVH, 0, HD) for _ in names]
dyn = {"tokens": {1: "seq"}, **{n: {2: "past"} for n in names}, "logits": {1: "seq"},
       **{o: {2: "total"} for o in outs[1:]}}
torch.onnx.export(m, (tokens, *[torch.zeros(1, KVH, 3, HD) for _ in names]), args.out + ".onnx",
                  input_names=["tokens"] + names, output_names=outs, dynamic_axes=dyn, opset_version=14)
# A 7-token prefill, then greedy steps feeding present back as past.
io, past, tok = {}, empty, tokens
with torch.no_grad():
    for step in range(4):
        r = m(tok, *past)
        io[f"s{step}_tokens"] = tok.numpy()
        for n, p in zip(names, past): io[f"s{step}_{n}"] = p.numpy()
        io[f"s{step}_logits"] = r[0].numpy()
        past = list(r[1:]); tok = r[0][:, -1:].argmax(-1)
np.savez(args.out + "_io.npz", **io)
print("wrote %s.onnx and %s_io.npz" % (args.out, args.out))
