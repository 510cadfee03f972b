#!/usr/bin/python3
"""Transformer exports in the styles people ship (torch 1.13, opset 14): LayerNorm and
RMSNorm spelled out as ReduceMean/Sub/Pow/Sqrt/Div (no LayerNormalization below opset 17),
GELU as Erf arithmetic, attention as matmul/scale/softmax/matmul, Llama-style RoPE,
grouped-query attention through repeat_interleave and an additive causal mask. Random
weights, static shapes (repeat_interleave with dynamic axes exports a graph ORT cannot
run). Writes gpt_style.onnx (4 layers, d 256, seq 128) and llama_style.onnx (6 layers,
d 256, seq 64) into the current directory; bench them with
`scripts/bench onnx gpt_style.onnx --shape 1,128,256`. Not a test dependency."""
import math, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)

class GptBlock(nn.Module):
    def __init__(s, d=256, h=4, ff=1024):
        super().__init__(); s.h=h; s.ln1=nn.LayerNorm(d); s.ln2=nn.LayerNorm(d)
        s.qkv=nn.Linear(d,3*d); s.o=nn.Linear(d,d); s.f1=nn.Linear(d,ff); s.f2=nn.Linear(ff,d)
    def forward(s,x):
        B,T,D=x.shape; hd=D//s.h
        q,k,v=s.qkv(s.ln1(x)).split(D,dim=-1)
        q=q.view(B,T,s.h,hd).transpose(1,2); k=k.view(B,T,s.h,hd).transpose(1,2); v=v.view(B,T,s.h,hd).transpose(1,2)
        a=torch.softmax(q@k.transpose(-2,-1)/math.sqrt(hd),dim=-1)@v
        x=x+s.o(a.transpose(1,2).reshape(B,T,D))
        return x+s.f2(F.gelu(s.f1(s.ln2(x))))

class Gpt(nn.Module):
    def __init__(s,n=4): super().__init__(); s.blocks=nn.ModuleList([GptBlock() for _ in range(n)]); s.lnf=nn.LayerNorm(256)
    def forward(s,x):
        for b in s.blocks: x=b(x)
        return s.lnf(x)

class RMSNorm(nn.Module):
    def __init__(s,d,eps=1e-6): super().__init__(); s.w=nn.Parameter(torch.ones(d)+0.1*torch.randn(d)); s.eps=eps
    def forward(s,x): return x*torch.rsqrt(x.pow(2).mean(-1,keepdim=True)+s.eps)*s.w

def rope(x, cos, sin):
    x1,x2=x[...,:x.shape[-1]//2],x[...,x.shape[-1]//2:]
    return x*cos+torch.cat((-x2,x1),dim=-1)*sin

class LlamaBlock(nn.Module):
    def __init__(s,d=256,h=8,kvh=2,ff=688):
        super().__init__(); s.h=h; s.kvh=kvh; s.hd=d//h
        s.n1=RMSNorm(d); s.n2=RMSNorm(d)
        s.q=nn.Linear(d,d,bias=False); s.k=nn.Linear(d,kvh*s.hd,bias=False); s.v=nn.Linear(d,kvh*s.hd,bias=False); s.o=nn.Linear(d,d,bias=False)
        s.g=nn.Linear(d,ff,bias=False); s.u=nn.Linear(d,ff,bias=False); s.dn=nn.Linear(ff,d,bias=False)
    def forward(s,x,cos,sin,mask):
        B,T,D=x.shape; y=s.n1(x)
        q=s.q(y).view(B,T,s.h,s.hd).transpose(1,2); k=s.k(y).view(B,T,s.kvh,s.hd).transpose(1,2); v=s.v(y).view(B,T,s.kvh,s.hd).transpose(1,2)
        q=rope(q,cos,sin); k=rope(k,cos,sin)
        k=k.repeat_interleave(s.h//s.kvh,dim=1); v=v.repeat_interleave(s.h//s.kvh,dim=1)
        a=torch.softmax(q@k.transpose(-2,-1)/math.sqrt(s.hd)+mask,dim=-1)@v
        x=x+s.o(a.transpose(1,2).reshape(B,T,D))
        y=s.n2(x)
        return x+s.dn(F.silu(s.g(y))*s.u(y))

class Llama(nn.Module):
    def __init__(s,n=6,T=64,d=256,h=8):
        super().__init__(); s.blocks=nn.ModuleList([LlamaBlock() for _ in range(n)]); s.nf=RMSNorm(d)
        hd=d//h; inv=1.0/(10000**(torch.arange(0,hd,2).float()/hd)); t=torch.arange(T).float()
        f=torch.outer(t,inv); e=torch.cat((f,f),dim=-1)
        s.register_buffer('cos',e.cos()); s.register_buffer('sin',e.sin())
        s.register_buffer('mask',torch.triu(torch.full((T,T),float('-inf')),diagonal=1))
    def forward(s,x):
        for b in s.blocks: x=b(x,s.cos,s.sin,s.mask)
        return s.nf(x)

with torch.no_grad():
    torch.onnx.export(Gpt().eval(), torch.randn(1,128,256), 'gpt_style.onnx', opset_version=14, input_names=['x'])
    torch.onnx.export(Llama().eval(), torch.randn(1,64,256), 'llama_style.onnx', opset_version=14, input_names=['x'])
print('ok')
