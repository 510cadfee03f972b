// Runs one ONNX model once under ONNX Runtime (onnxruntime-node) on inputs
// given as raw files and writes every output, for bench/real_bench.py's
// correctness check (models with several inputs and outputs):
//
//   node bench/ort_run.js MODEL.onnx SPEC.json OUT_DIR
//
// SPEC.json: {"inputs": [{"name", "dtype": "float32"|"int64"|"bool"|"uint8", "shape": [...],
// "file": "x.bin"}, ...]}. Writes OUT_DIR/out<i>.bin (the raw data of output
// i, in session.outputNames order) and OUT_DIR/outputs.json ([{"name",
// "dtype", "dims"}, ...]). One thread, all graph optimizations.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const { feedsFromSpec } = require('./ort_feeds.js');

async function main() {
  const [modelPath, specPath, outDir] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = feedsFromSpec(ort, specPath);
  const result = await session.run(feeds);
  const meta = session.outputNames.map((name, i) => {
    const t = result[name];
    const d = t.data;
    fs.writeFileSync(path.join(outDir, `out${i}.bin`), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    return { name, dtype: t.type, dims: t.dims };
  });
  fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(meta));
}

main().catch((e) => { console.error('error ' + String(e).replace(/\n/g, ' ')); process.exit(1); });
