// Where ONNX Runtime spends its time on one model, per node: the ORT side of
// `maxc profile`, to compare kernel by kernel (which of maxc's kernels is
// slower than ORT's node, not only whether the model is).
//
//   NODE_PATH=ORT_DIR/node_modules node bench/ort_profile.js MODEL.onnx THREADS RUNS NAME:DTYPE:D1xD2x... [...] [--top N]
//   NODE_PATH=ORT_DIR/node_modules node bench/ort_profile.js MODEL.onnx THREADS RUNS SPEC.json [--top N]
//
// Inputs as bench/ort_time.js makes them (float32 uniform in [-1, 1),
// int64 0..99, or a SPEC.json of raw files). Runs the model RUNS times after
// 3 warmup runs with ORT's profiler on (its JSON trace goes to a temporary
// file, removed afterwards) and prints the nodes by time per run: ms, share,
// op, node name (ORT's name after its graph optimizations: fused nodes end in
// their last node's output name, "_nchwc" marks its blocked layout), then
// the total and the time per op type. Profiling adds a little time per
// node; compare shares and the larger nodes.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');
const { feedsFromArgs } = require('./ort_feeds.js');

async function main() {
  const args = process.argv.slice(2);
  let top = 20;
  const at = args.indexOf('--top');
  if (at >= 0) {
    top = Number(args[at + 1]);
    args.splice(at, 2);
  }
  const [modelPath, threads, runs, ...specs] = args;
  if (!modelPath || !(Number(runs) > 0) || specs.length === 0) {
    console.error('usage: node bench/ort_profile.js MODEL.onnx THREADS RUNS NAME:DTYPE:D1xD2x... [...] [--top N]');
    process.exit(2);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_profile-'));
  try {
    const session = await ort.InferenceSession.create(modelPath, {
      intraOpNumThreads: Number(threads),
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      enableProfiling: true,
      profileFilePrefix: path.join(dir, 'trace'),
    });
    const feeds = feedsFromArgs(ort, specs);
    for (let i = 0; i < 3 + Number(runs); ++i)
      await session.run(feeds);
    session.endProfiling();
    const trace = fs.readdirSync(dir).find((f) => f.endsWith('.json'));
    const events = JSON.parse(fs.readFileSync(path.join(dir, trace), 'utf8'));
    const byNode = new Map();
    for (const e of events) {
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time'))
        continue;
      const key = e.name.slice(0, -'_kernel_time'.length);
      const entry = byNode.get(key) || { op: e.args.op_name, us: 0 };
      entry.us += e.dur;
      byNode.set(key, entry);
    }
    const total = [...byNode.values()].reduce((a, e) => a + e.us, 0);
    const per = (us) => us / (3 + Number(runs)) / 1000; // the warmup runs are in the trace too
    const rows = [...byNode.entries()].sort((a, b) => b[1].us - a[1].us);
    console.log(`ort_profile: ${modelPath}, ${threads} thread(s), ${runs} runs: ${per(total).toFixed(3)} ms of nodes per run`);
    for (const [name, e] of rows.slice(0, top))
      console.log(`${per(e.us).toFixed(3).padStart(9)}  ${(100 * e.us / total).toFixed(1).padStart(5)}%  ${e.op.padEnd(18)} ${name}`);
    if (rows.length > top)
      console.log(`  ... ${rows.length - top} more nodes`);
    const byOp = new Map();
    for (const e of byNode.values())
      byOp.set(e.op, (byOp.get(e.op) || 0) + e.us);
    console.log('by op: ' + [...byOp.entries()].sort((a, b) => b[1] - a[1])
      .map(([op, us]) => `${op} ${per(us).toFixed(3)} ms`).join(', '));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => { console.error(String(e)); process.exit(1); });
