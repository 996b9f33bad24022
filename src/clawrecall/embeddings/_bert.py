"""A BERT encoder's ONNX graph, written from its safetensors weights: no PyTorch, no `onnx` package.

Why: exporting with `torch.onnx` needs PyTorch and its friends (~1.3 GB installed) for one 9–11 s
step, and wrote a second 90 MB copy of the weights per user. The graph of a BERT encoder is small
and fixed (embeddings, then N × [self-attention, feed-forward], each closed by a residual
LayerNorm), so it is written here as ONNX protobuf by hand, in memory, in ~0.1 s on each load;
ONNX Runtime runs it and nothing is cached on disk. Its vectors equal the PyTorch export's
(tests/test_local_model.py compares them with reference vectors made by sentence-transformers).

Only models this graph describes qualify (`model_type` bert, absolute positions, GELU); `None`
sends the others to the PyTorch export (`_onnx.export`).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16}
_FLOAT, _INT64 = 1, 7  # TensorProto.DataType
_OPSET, _IR_VERSION = 17, 8


def config_of(model_dir: Path) -> dict | None:
    """The model's config.json when this graph describes it, else None."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not (model_dir / "model.safetensors").exists():
        return None
    if (
        config.get("model_type") != "bert"
        or config.get("hidden_act", "gelu") != "gelu"
        or config.get("position_embedding_type", "absolute") != "absolute"
        or config.get("hidden_size", 0) % max(config.get("num_attention_heads", 0), 1)
    ):
        return None
    return config


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file (8-byte header length, JSON header, raw little-endian data)."""
    data = np.memmap(path, dtype=np.uint8, mode="r")
    (size,) = struct.unpack("<Q", bytes(data[:8]))
    header = json.loads(bytes(data[8 : 8 + size]))
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] not in _DTYPES:
            continue
        start, end = info["data_offsets"]
        raw = data[8 + size + start : 8 + size + end]
        tensors[name.removeprefix("bert.")] = raw.view(_DTYPES[info["dtype"]]).reshape(info["shape"]).astype(np.float32, copy=False)
    return tensors


def build(model_dir: Path, config: dict) -> bytes:
    """The serialized ONNX model: inputs input_ids, attention_mask, token_type_ids [batch, tokens]
    (int64); output `hidden`, the last hidden states [batch, tokens, hidden] (float32)."""
    return _Graph(read_safetensors(model_dir / "model.safetensors"), config).model()


class _Graph:
    def __init__(self, weights: dict[str, np.ndarray], config: dict) -> None:
        self.w = weights
        self.config = config
        self.nodes: list[bytes] = []
        self.inits: list[list] = []  # each TensorProto as parts: its header, then its raw data
        self.count = 0

    def model(self) -> bytes:
        c = self.config
        eps = float(c.get("layer_norm_eps", 1e-12))
        heads, hidden = int(c["num_attention_heads"]), int(c["hidden_size"])
        head = hidden // heads
        word = self.op("Gather", self.init("embeddings.word_embeddings.weight"), "input_ids")
        kinds = self.op("Gather", self.init("embeddings.token_type_embeddings.weight"), "token_type_ids")
        length = self.op("Shape", "input_ids", start=1, end=2)
        zero = self.const(np.array([0], np.int64))
        positions = self.op("Slice", self.init("embeddings.position_embeddings.weight"), zero, length, zero)
        x = self.op("Add", self.op("Add", word, kinds), positions)
        x = self.norm(x, "embeddings.LayerNorm", eps)
        # padding: a large negative score before the softmax, as transformers does (dtype min)
        mask = self.op("Cast", "attention_mask", to=_FLOAT)
        mask = self.op("Unsqueeze", mask, self.const(np.array([1, 2], np.int64)))  # [batch, 1, 1, tokens]
        one = self.const(np.array(1.0, np.float32))
        bias = self.op("Mul", self.op("Sub", one, mask), self.const(np.array(np.finfo(np.float32).min, np.float32)))
        split = self.const(np.array([0, 0, heads, head], np.int64))
        merge = self.const(np.array([0, 0, hidden], np.int64))
        scale = self.const(np.array(1 / math.sqrt(head), np.float32))
        for n in range(int(c["num_hidden_layers"])):
            p = f"encoder.layer.{n}."
            q, k, v = (
                self.op("Transpose", self.op("Reshape", self.linear(x, p + name), split), perm=perm)
                for name, perm in (
                    ("attention.self.query", [0, 2, 1, 3]),  # [batch, heads, tokens, head]
                    ("attention.self.key", [0, 2, 3, 1]),  # [batch, heads, head, tokens]
                    ("attention.self.value", [0, 2, 1, 3]),
                )
            )
            scores = self.op("Add", self.op("Mul", self.op("MatMul", q, k), scale), bias)
            context = self.op("MatMul", self.op("Softmax", scores, axis=-1), v)
            context = self.op("Reshape", self.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
            x = self.norm(self.op("Add", self.linear(context, p + "attention.output.dense"), x), p + "attention.output.LayerNorm", eps)
            h = self.linear(x, p + "intermediate.dense")
            h = self.gelu(h)
            x = self.norm(self.op("Add", self.linear(h, p + "output.dense"), x), p + "output.LayerNorm", eps)
        self.nodes.append(_node("Identity", [x], ["hidden"], "out"))
        inputs = [_value_info(name, _INT64, ["batch", "tokens"]) for name in ("input_ids", "attention_mask", "token_type_ids")]
        graph = [
            *(_field(1, node) for node in self.nodes),
            _field(2, b"bert"),
            *(part for tensor in self.inits for part in _field_parts(5, tensor)),
            *(_field(11, i) for i in inputs),
            _field(12, _value_info("hidden", _FLOAT, ["batch", "tokens", hidden])),
        ]
        opset = _field(1, b"") + _varint_field(2, _OPSET)
        header = _varint_field(1, _IR_VERSION) + _field(2, b"clawrecall")
        # one copy of the weights, here: each part is a header or a tensor's own buffer
        return b"".join([header, *_field_parts(7, graph), _field(8, opset)])

    def gelu(self, h: str) -> str:
        """0.5·h·(1 + erf(h/√2)): the exact GELU, as BERT's `gelu`."""
        erf = self.op("Erf", self.op("Div", h, self.const(np.array(math.sqrt(2.0), np.float32))))
        half = self.op("Mul", h, self.const(np.array(0.5, np.float32)))
        return self.op("Mul", half, self.op("Add", erf, self.const(np.array(1.0, np.float32))))

    def linear(self, x: str, prefix: str) -> str:
        """x·Wᵀ + b (the weight stored transposed, as MatMul wants it)."""
        weight = self.tensor(prefix + ".weight.T", np.ascontiguousarray(self.w[prefix + ".weight"].T))
        return self.op("Add", self.op("MatMul", x, weight), self.init(prefix + ".bias"))

    def norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op("LayerNormalization", x, self.init(prefix + ".weight"), self.init(prefix + ".bias"), axis=-1, epsilon=eps)

    def init(self, name: str) -> str:
        return self.tensor(name, self.w[name])

    def const(self, value: np.ndarray) -> str:
        self.count += 1
        return self.tensor(f"const{self.count}", value)

    def tensor(self, name: str, value: np.ndarray) -> str:
        kind = _INT64 if value.dtype == np.int64 else _FLOAT
        value = value.astype("<i8" if kind == _INT64 else "<f4", copy=False)
        value = np.ascontiguousarray(value)
        dims = b"".join(_varint_field(1, d) for d in value.shape)
        head = dims + _varint_field(2, kind) + _field(8, name.encode()) + _key(9, 2) + _varint(value.nbytes)
        self.inits.append([head, value.data.cast("B")])
        return name

    def op(self, kind: str, *inputs: str, **attrs) -> str:
        self.count += 1
        out = f"{kind}{self.count}"
        self.nodes.append(_node(kind, list(inputs), [out], out, attrs))
        return out


def _node(kind: str, inputs: list[str], outputs: list[str], name: str, attrs: dict | None = None) -> bytes:
    body = b"".join(_field(1, i.encode()) for i in inputs) + b"".join(_field(2, o.encode()) for o in outputs)
    body += _field(3, name.encode()) + _field(4, kind.encode())
    for key, value in (attrs or {}).items():
        body += _field(5, _attribute(key, value))
    return body


def _attribute(name: str, value) -> bytes:
    """AttributeProto: name (1), f (2), i (3), ints (8), type (20: FLOAT 1, INT 2, INTS 7)."""
    if isinstance(value, float):
        return _field(1, name.encode()) + _key(2, 5) + struct.pack("<f", value) + _varint_field(20, 1)
    if isinstance(value, list):
        return _field(1, name.encode()) + b"".join(_varint_field(8, v) for v in value) + _varint_field(20, 7)
    return _field(1, name.encode()) + _varint_field(3, value) + _varint_field(20, 2)


def _value_info(name: str, elem: int, dims: list) -> bytes:
    """ValueInfoProto{name, TypeProto{tensor_type{elem_type, shape{dim{dim_value | dim_param}}}}}."""
    shape = b"".join(
        _field(1, _varint_field(1, d) if isinstance(d, int) else _field(2, d.encode())) for d in dims
    )
    tensor = _varint_field(1, elem) + _field(2, shape)
    return _field(1, name.encode()) + _field(2, _field(1, tensor))


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _varint_field(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _field(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def _field_parts(field: int, parts: list) -> list:
    """A length-delimited field whose payload stays in parts (joined once, at the end)."""
    return [_key(field, 2) + _varint(sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts)), *parts]
