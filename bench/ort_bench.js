// A timing server for one ONNX model under ONNX Runtime (onnxruntime-node),
// driven by bench/model_bench.py so that its timing blocks alternate with
// maxc's (bench/model_bench.c) in one run. Same protocol as model_bench.c:
//
//   node bench/ort_bench.js MODEL.onnx INPUT_NAME float32|int64 THREADS DIM1 [DIM2...]
//
// then one request per stdin line, INPUT.bin BATCH OUT_ELEMS ITERS WARMUP
// OUT.bin|-, each answered by one line of ITERS run times in ms. The input
// shape is [BATCH, DIM1, ...]. Times are of `await session.run(feeds)` with
// the input tensor created once (ORT allocates the output on each run).
'use strict';
const fs = require('fs');
const readline = require('readline');
const ort = require('onnxruntime-node');

async function main() {
  const [modelPath, inputName, dtype, threads, ...rest] = process.argv.slice(2);
  const dims = rest.map(Number);
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const outputName = session.outputNames[0];
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    const f = line.trim().split(/\s+/);
    if (f.length !== 6) { console.log('error bad request'); continue; }
    const [inPath, batch, , iters, warmup, outPath] = [f[0], Number(f[1]), Number(f[2]), Number(f[3]), Number(f[4]), f[5]];
    const buf = fs.readFileSync(inPath);
    const bytes = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
    const data = dtype === 'int64' ? new BigInt64Array(bytes) : new Float32Array(bytes);
    const feeds = { [inputName]: new ort.Tensor(dtype, data, [batch, ...dims]) };
    let result;
    for (let i = 0; i < warmup; ++i) result = await session.run(feeds);
    const times = [];
    for (let i = 0; i < iters; ++i) {
      const t0 = process.hrtime.bigint();
      result = await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    if (outPath !== '-') {
      const out = result[outputName].data;
      fs.writeFileSync(outPath, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
    }
    console.log(times.map((t) => t.toFixed(6)).join(' '));
  }
}

main().catch((e) => { console.log('error ' + String(e).replace(/\n/g, ' ')); process.exit(1); });
