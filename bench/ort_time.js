// Latency of one ONNX model under ONNX Runtime (onnxruntime-node) on
// pseudo-random inputs of given shapes: the ORT side of the benchmarks whose
// maxc side is a generated bench harness (maxc compile --emit bench-harness),
// for models with several inputs (bench/kv_decode_bench.py).
//
//   node bench/ort_time.js MODEL.onnx THREADS RUNS WARMUP NAME:DTYPE:D1xD2x... [...]
//   node bench/ort_time.js MODEL.onnx THREADS RUNS WARMUP SPEC.json
//
// DTYPE float32 (uniform in [-1, 1)) or int64 (0..99); or the inputs of a
// SPEC.json as bench/ort_run.js reads it (raw files; bench/real_bench.py's
// timing of models with several inputs). Prints one line: the
// RUNS run times in ms, space separated. Inputs are created once; each run is
// `await session.run(feeds)` (ORT allocates the outputs).
'use strict';
const ort = require('onnxruntime-node');
const { feedsFromArgs } = require('./ort_feeds.js');

async function main() {
  const [modelPath, threads, runs, warmup, ...specs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = feedsFromArgs(ort, specs);
  for (let i = 0; i < Number(warmup); ++i) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  console.log(times.map((t) => t.toFixed(4)).join(' '));
}

main().catch((e) => { console.error(String(e)); process.exit(1); });
