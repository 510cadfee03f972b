// The ONNX Runtime feeds of a SPEC.json, shared by bench/ort_run.js,
// bench/ort_time.js and bench/ort_profile.js: {"inputs": [{"name", "dtype":
// "float32"|"int64"|"bool"|"uint8", "shape": [...], "file": "x.bin"}, ...]},
// each file the input's raw data; or (feedsFromArgs) pseudo-random inputs
// from NAME:DTYPE:D1xD2x... arguments.
'use strict';
const fs = require('fs');

function feedsFromSpec(ort, specPath) {
  const feeds = {};
  for (const input of JSON.parse(fs.readFileSync(specPath, 'utf8')).inputs) {
    const buf = fs.readFileSync(input.file);
    const bytes = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
    const data = input.dtype === 'int64' ? new BigInt64Array(bytes)
               : input.dtype === 'bool' || input.dtype === 'uint8' ? new Uint8Array(bytes)
               : new Float32Array(bytes);
    feeds[input.name] = new ort.Tensor(input.dtype, data, input.shape);
  }
  return feeds;
}

// Feeds from NAME:DTYPE:D1xD2x... arguments (NAME may hold ':' itself, as
// tf2onnx's "input:0"; an empty shape is a scalar), or the one SPEC.json
// argument: DTYPE float32 or float16 (uniform in [-1, 1)) or int64 (0..99), from a
// fixed seed, so every script feeds the same values.
function feedsFromArgs(ort, specs) {
  if (specs.length === 1 && specs[0].endsWith('.json'))
    return feedsFromSpec(ort, specs[0]);
  let seed = 12345;
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const feeds = {};
  for (const spec of specs) {
    const parts = spec.split(':');
    const shapeText = parts.pop(), dtype = parts.pop(), name = parts.join(':');
    const shape = shapeText === '' ? [] : shapeText.split('x').map(Number);
    const n = shape.reduce((a, b) => a * b, 1);
    let data;
    if (dtype === 'int64') {
      data = new BigInt64Array(n);
      for (let i = 0; i < n; ++i) data[i] = BigInt(Math.floor(rand() * 100));
    } else if (dtype === 'float16') { // the bits of f16 values (truncated from f32; tiny ones flushed to 0)
      data = new Uint16Array(n);
      const f = new Float32Array(1), u = new Uint32Array(f.buffer);
      for (let i = 0; i < n; ++i) {
        f[0] = rand() * 2 - 1;
        const x = u[0], e = ((x >>> 23) & 0xff) - 127 + 15;
        data[i] = ((x >>> 16) & 0x8000) | (e > 0 ? (e << 10) | ((x >>> 13) & 0x3ff) : 0);
      }
    } else {
      data = new Float32Array(n);
      for (let i = 0; i < n; ++i) data[i] = rand() * 2 - 1;
    }
    feeds[name] = new ort.Tensor(dtype, data, shape);
  }
  return feeds;
}

module.exports = { feedsFromSpec, feedsFromArgs };
