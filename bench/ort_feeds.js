// The ONNX Runtime feeds of a SPEC.json, shared by bench/ort_run.js and
// bench/ort_time.js: {"inputs": [{"name", "dtype": "float32"|"int64"|"bool"|"uint8",
// "shape": [...], "file": "x.bin"}, ...]}, each file the input's raw data.
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

module.exports = { feedsFromSpec };
