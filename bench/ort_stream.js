// Runs one ONNX model over consecutive chunks under ONNX Runtime
// (onnxruntime-node), feeding outputs back as inputs the way a streaming
// application does (a VAD model's state), for bench/vad_stream.py:
//
//   node bench/ort_stream.js MODEL.onnx SPEC.json OUT_DIR
//
// SPEC.json: {"chunks": N,
//   "inputs": [{"name", "dtype": "float32"|"int64", "shape": [...],
//               "file": "x.bin", "per_chunk": true|false}, ...],
//   "feedback": {"output name": "input name", ...}}
// A per_chunk input's file holds N chunks one after another; the others hold
// one value, used for the first chunk (a fed-back input) or every chunk.
// Writes OUT_DIR/<output name>.bin: every chunk's value of each output, one
// after another, and prints the chunk loop's seconds (the session's
// creation excluded). One thread, all graph optimizations.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function typed(dtype, bytes) {
  return dtype === 'int64' ? new BigInt64Array(bytes) : new Float32Array(bytes);
}

async function main() {
  const [modelPath, specPath, outDir] = process.argv.slice(2);
  const spec = JSON.parse(fs.readFileSync(specPath, 'utf8'));
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const data = {};
  for (const input of spec.inputs) {
    const buf = fs.readFileSync(input.file);
    data[input.name] = typed(input.dtype, buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
  }
  const feeds = {};
  for (const input of spec.inputs)
    if (!input.per_chunk) feeds[input.name] = new ort.Tensor(input.dtype, data[input.name], input.shape);
  const collected = {};
  const t0 = process.hrtime.bigint();
  for (const name of session.outputNames) collected[name] = [];
  for (let c = 0; c < spec.chunks; ++c) {
    for (const input of spec.inputs) {
      if (!input.per_chunk) continue;
      const n = input.shape.reduce((a, b) => a * b, 1);
      feeds[input.name] = new ort.Tensor(input.dtype, data[input.name].slice(c * n, (c + 1) * n), input.shape);
    }
    const result = await session.run(feeds);
    for (const name of session.outputNames) {
      const d = result[name].data;
      collected[name].push(Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    }
    for (const [out, input] of Object.entries(spec.feedback || {})) feeds[input] = result[out];
  }
  const seconds = Number(process.hrtime.bigint() - t0) * 1e-9;
  for (const name of session.outputNames)
    fs.writeFileSync(path.join(outDir, `${name}.bin`), Buffer.concat(collected[name]));
  console.log(seconds.toFixed(9));
}

main().catch((e) => { console.error('error ' + String(e).replace(/\n/g, ' ')); process.exit(1); });
