#!/usr/bin/python3
"""Writes RecordIO and TFRecord files without any ElasticDL code.

Usage: make_compat_files.py OUTDIR

Every byte is laid out here by hand from the format descriptions (RecordIO
chunks, the snappy framing format, TFRecord framing, the protobuf wire format
of tf.train.Example), so that compat_test.cc checks our reader against an
independent producer rather than against our own writer. Only the raw snappy
block codec (python3-snappy) and CRC-32C (python3-crc32c) come from libraries.

Alongside the data files it writes
  manifest.json  every file's format, records (hex) and, where they apply, the
                 RecordIO chunk layout (compressor code and record count of
                 each chunk) and the decoded Example features;
  manifest.txt   the same facts, one token-separated line each, for the C++
                 test (which has no JSON parser):
                   file FORMAT NAME NUM_RECORDS
                   compressors C0 C1 ...          (RecordIO only: each chunk's
                   chunk_records N0 N1 ...         compressor code and record count)
                   record HEX                     (NUM_RECORDS lines; "-" = empty)
                   example RECORD_INDEX NUM_FEATURES
                   feature KEY_HEX KIND COUNT V1 V2 ...
                   end
                 KIND is none, bytes, float or int64; bytes values are hex
                 ("-" = empty), floats the hex of their IEEE float32 bits,
                 int64s decimal.
"""

import gzip
import json
import math
import os
import struct
import sys
import zlib

import crc32c
import snappy

# ---------------------------------------------------------------------------
# Checksums and deterministic test data.


def masked_crc32c(data):
    """The masked CRC-32C of TFRecord and the snappy framing format."""
    crc = crc32c.crc32c(data)
    rotated = ((crc >> 15) | (crc << 17)) & 0xFFFFFFFF
    return (rotated + 0xA282EAD8) & 0xFFFFFFFF


def pseudo_random_bytes(n, seed):
    """n incompressible but reproducible bytes (xorshift32)."""
    state = seed & 0xFFFFFFFF or 1
    out = bytearray(n)
    for i in range(n):
        state ^= (state << 13) & 0xFFFFFFFF
        state ^= state >> 17
        state ^= (state << 5) & 0xFFFFFFFF
        out[i] = state & 0xFF
    return bytes(out)


# ---------------------------------------------------------------------------
# The snappy framing format
# (https://github.com/google/snappy/blob/main/framing_format.txt).

STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
MAX_BLOCK = 65536


def frame_chunk(chunk_type, body):
    """One framed chunk: type byte, 3-byte little-endian body length, body."""
    assert len(body) < 1 << 24
    return bytes([chunk_type]) + struct.pack("<I", len(body))[:3] + body


def snappy_framed(data, kinds="c", extras=False):
    """Frames `data` in blocks of at most 64 KiB.

    kinds: per block, cycled: "c" for a compressed chunk (type 0x00), "u" for
      an uncompressed one (type 0x01).
    extras: also emit what readers must accept and ignore: a padding chunk
      (0xfe), reserved skippable chunks (0x80 and 0xfd), a repeated stream
      identifier and blocks of no data (compressed and not), between blocks
      and at the end.
    """
    out = bytearray(STREAM_IDENTIFIER)
    if extras:
        out += frame_chunk(0xFE, b"\x00" * 7)
        empty_crc = struct.pack("<I", masked_crc32c(b""))
        out += frame_chunk(0x00, empty_crc + snappy.compress(b""))
        out += frame_chunk(0x01, empty_crc)
    blocks = [data[i:i + MAX_BLOCK] for i in range(0, len(data), MAX_BLOCK)]
    for n, block in enumerate(blocks):
        crc = struct.pack("<I", masked_crc32c(block))
        if kinds[n % len(kinds)] == "c":
            out += frame_chunk(0x00, crc + snappy.compress(block))
        else:
            out += frame_chunk(0x01, crc + block)
        if extras and n == 0:
            out += frame_chunk(0x80, b"skip me")
            out += STREAM_IDENTIFIER
    if extras:
        out += frame_chunk(0xFD, b"")
        out += frame_chunk(0xFE, b"")
    return bytes(out)


# ---------------------------------------------------------------------------
# gzip (RFC 1952).


def gzip_with_header_fields(data):
    """A gzip member built by hand with every optional header field (FEXTRA,
    FNAME, FCOMMENT, FHCRC) and stored (level 0) deflate blocks."""
    header = b"\x1f\x8b\x08" + bytes([0x04 | 0x08 | 0x10 | 0x02])
    header += struct.pack("<I", 1700000000) + b"\x00\x03"  # mtime, XFL, OS (Unix)
    extra = b"ED" + struct.pack("<H", 3) + b"abc"
    header += struct.pack("<H", len(extra)) + extra
    header += b"chunk.bin\x00" + b"written by make_compat_files.py\x00"
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    deflate = zlib.compressobj(0, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    trailer = struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)
    return header + body + trailer


# ---------------------------------------------------------------------------
# RecordIO.

NONE, SNAPPY, GZIP = 0, 1, 2
RECORDIO_MAGIC = 0x01020304


def recordio_chunk(records, compressor, snappy_kinds="c", snappy_extras=False,
                   snappy_bare=False, gzip_members=1, gzip_fields=False):
    """One RecordIO chunk (20-byte header + stored payload) holding `records`.

    snappy_kinds, snappy_extras: as for snappy_framed.
    snappy_bare: for a chunk without records, store no bytes at all rather
      than a stream identifier: the empty stream of a framing writer that was
      never written to (Go's snappy.Writer writes its identifier lazily).
    gzip_members > 1 splits the payload over that many concatenated gzip
      members, which a gzip reader must read as one stream.
    gzip_fields: write the (single) member with gzip_with_header_fields.
    """
    raw = b"".join(struct.pack("<I", len(r)) + r for r in records)
    if compressor == NONE:
        stored = raw
    elif compressor == SNAPPY and snappy_bare:
        assert not records
        stored = b""
    elif compressor == SNAPPY:
        stored = snappy_framed(raw, snappy_kinds, snappy_extras)
    elif compressor == GZIP and gzip_fields:
        stored = gzip_with_header_fields(raw)
    elif compressor == GZIP:
        cut = [len(raw) * i // gzip_members for i in range(gzip_members + 1)]
        stored = b"".join(gzip.compress(raw[cut[i]:cut[i + 1]])
                          for i in range(gzip_members))
    else:
        raise ValueError(compressor)
    header = struct.pack("<5I", RECORDIO_MAGIC, zlib.crc32(stored) & 0xFFFFFFFF,
                         compressor, len(stored), len(records))
    return header + stored


# ---------------------------------------------------------------------------
# TFRecord.


def tfrecord(records):
    out = bytearray()
    for r in records:
        length = struct.pack("<Q", len(r))
        out += length + struct.pack("<I", masked_crc32c(length))
        out += r + struct.pack("<I", masked_crc32c(r))
    return bytes(out)


# ---------------------------------------------------------------------------
# tf.train.Example in the protobuf wire format:
#   Example  { Features features = 1; }
#   Features { map<string, Feature> feature = 1; }  (entries: key = 1, value = 2)
#   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
#                      Int64List int64_list = 3; } }
#   BytesList { repeated bytes value = 1; }
#   FloatList { repeated float value = 1 [packed = true]; }
#   Int64List { repeated int64 value = 1 [packed = true]; }


def varint(n):
    """Base-128 varint; negative int64 values take ten bytes (two's complement)."""
    if n < 0:
        n += 1 << 64
    assert 0 <= n < 1 << 64
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(field, wire_type):
    return varint(field << 3 | wire_type)


def length_delimited(field, payload):
    return tag(field, 2) + varint(len(payload)) + payload


def float32(x):
    """x rounded to float32 (as a Python float)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def float_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_float(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def bytes_list(values):
    return b"".join(length_delimited(1, v) for v in values)


def float_list(values, packed=True):
    if packed:
        if not values:
            return b""
        return length_delimited(1, b"".join(struct.pack("<f", v) for v in values))
    return b"".join(tag(1, 5) + struct.pack("<f", v) for v in values)


def int64_list(values, packed=True):
    if packed:
        if not values:
            return b""
        return length_delimited(1, b"".join(varint(v) for v in values))
    return b"".join(tag(1, 0) + varint(v) for v in values)


def feature(kind, values, packed=True):
    if kind == "bytes":
        return length_delimited(1, bytes_list(values))
    if kind == "float":
        return length_delimited(2, float_list(values, packed))
    if kind == "int64":
        return length_delimited(3, int64_list(values, packed))
    assert kind == "none"
    return b""


def map_entry(key, feature_message):
    return length_delimited(1, length_delimited(1, key.encode("utf-8")) +
                            length_delimited(2, feature_message))


def example(entries):
    """A plain Example: one Features message holding `entries` (key, kind, values)."""
    features = b"".join(map_entry(k, feature(kind, v)) for k, kind, v in entries)
    return length_delimited(1, features)


def expected_features(entries):
    """{key: (kind, values)}, later entries for a key replacing earlier ones."""
    return {k: (kind, list(v)) for k, kind, v in entries}


def make_examples():
    """Returns [(serialized Example, {key: (kind, values)})]."""
    cases = []

    # MNIST-like: a 28x28 float image and an int64 label.
    image = [float32(((i * 37) % 256) / 255.0) for i in range(784)]
    entries = [("image", "float", image), ("label", "int64", [7])]
    cases.append((example(entries), expected_features(entries)))

    # Bytes (including empty and non-UTF-8 values), extreme and negative
    # int64s, floats with special values, a non-ASCII key.
    nan = bits_float(0x7FC00001)
    entries = [
        ("name", "bytes", [b"hello", b"", b"\x00\xff\x80binary"]),
        ("ids", "int64", [-1, 0, 1, 127, 128, 300, -300, 2**63 - 1, -2**63]),
        ("weights", "float", [float32(-0.0), math.inf, -math.inf, nan,
                              float32(1.5), bits_float(1)]),
        ("gr\u00f6\u00dfe", "int64", [-42]),
    ]
    cases.append((example(entries), expected_features(entries)))

    # Empty lists, a Feature with no value set, and a feature-less Example.
    entries = [("no_floats", "float", []), ("no_ints", "int64", []),
               ("no_bytes", "bytes", []), ("unset", "none", [])]
    cases.append((example(entries), expected_features(entries)))
    cases.append((b"", {}))

    # Encodings protobuf's own parser accepts and a hand-written reader might
    # not: unpacked repeated scalars, packed and unpacked values mixed in one
    # list, an empty packed field, unknown fields of every wire type (a group
    # included), a Features message split over two `features` fields, a key
    # repeated (the later entry wins), a Feature whose list occurs twice (the
    # lists merge), one whose oneof switches kind (the last kind wins), and
    # map entries without a key ("") or without a value (an unset Feature).
    unknown_varint = tag(15, 0) + varint(12345)
    unknown_fixed64 = tag(9, 1) + b"\x01" * 8
    unknown_fixed32 = tag(10, 5) + b"\x02" * 4
    unknown_bytes = length_delimited(4, b"not a feature")
    unknown_group = tag(7, 3) + tag(1, 0) + varint(1) + length_delimited(2, b"x") + tag(7, 4)
    mixed_packing = float_list([1.0, 2.0]) + float_list([3.0], packed=False) + \
        float_list([4.0])
    unpacked = (
        map_entry("unpacked_f", feature("float", [float32(0.25), -2.0], packed=False)) +
        map_entry("unpacked_i", feature("int64", [5, -6, 2**40], packed=False)) +
        map_entry("mixed_packing", length_delimited(2, mixed_packing)) +
        map_entry("empty_packed", length_delimited(3, length_delimited(1, b""))))
    merged_list = length_delimited(3, int64_list([1, 2])) + unknown_fixed64 + \
        length_delimited(3, int64_list([3], packed=False))
    switched = length_delimited(2, float_list([9.0])) + length_delimited(1, bytes_list([b"z"]))
    keyless = length_delimited(1, length_delimited(2, feature("int64", [99])))
    valueless = length_delimited(1, length_delimited(1, b"no_value"))
    features_1 = unpacked + map_entry("dup", feature("int64", [1])) + \
        map_entry("merged", merged_list) + unknown_fixed32 + keyless
    features_2 = map_entry("dup", feature("bytes", [b"second"])) + \
        map_entry("switched", switched) + unknown_bytes + valueless
    record = unknown_varint + length_delimited(1, features_1) + unknown_group + \
        unknown_fixed64 + length_delimited(1, features_2) + unknown_bytes
    cases.append((record, {
        "unpacked_f": ("float", [0.25, -2.0]),
        "unpacked_i": ("int64", [5, -6, 2**40]),
        "mixed_packing": ("float", [1.0, 2.0, 3.0, 4.0]),
        "empty_packed": ("int64", []),
        "dup": ("bytes", [b"second"]),
        "merged": ("int64", [1, 2, 3]),
        "switched": ("bytes", [b"z"]),
        "": ("int64", [99]),
        "no_value": ("none", []),
    }))
    return cases


# ---------------------------------------------------------------------------
# The files.


def text_records(n, prefix):
    """n compressible records of varied length; every seventh is empty."""
    return [("%s-%d-" % (prefix, i)).encode() * (i % 7) for i in range(n)]


def make_files():
    """Returns [(name, format, file bytes, records, RecordIO chunk layout
    [(compressor, record count)] or None, examples {record index: features}
    or None)]."""
    files = []

    def recordio(name, chunks, examples=None):
        """chunks: [(records, compressor, recordio_chunk keyword arguments)]."""
        data = b"".join(recordio_chunk(r, c, **kw) for r, c, kw in chunks)
        records = [r for recs, _, _ in chunks for r in recs]
        layout = [(c, len(r)) for r, c, _ in chunks]
        files.append((name, "recordio", data, records, layout, examples))

    def tf(name, records, examples=None):
        files.append((name, "tfrecord", tfrecord(records), records, None, examples))

    binary = [pseudo_random_bytes(n, seed=n + 1) for n in (1, 3, 255, 256, 1000)]
    recs = text_records(30, "none") + binary
    recordio("none.recordio", [(recs[:10], NONE, {}), (recs[10:11], NONE, {}),
                               (recs[11:], NONE, {})])

    # Compressible text and incompressible bytes; compressed and uncompressed
    # snappy blocks; padding, skippable, empty and repeated-identifier chunks.
    recs = text_records(40, "snappy") + binary
    recordio("snappy.recordio", [
        (recs[:15], SNAPPY, {}),
        (recs[15:30], SNAPPY, dict(snappy_kinds="u")),
        (recs[30:], SNAPPY, dict(snappy_extras=True)),
    ])

    # Plain gzip, a stream of several members, and a member with every
    # optional header field.
    recs = text_records(40, "gzip") + binary
    recordio("gzip.recordio", [(recs[:20], GZIP, {}), (recs[20:21], GZIP, {}),
                               (recs[21:30], GZIP, dict(gzip_members=3)),
                               (recs[30:], GZIP, dict(gzip_fields=True))])

    recs = text_records(24, "mixed")
    codes = [NONE, SNAPPY, GZIP, SNAPPY, NONE, GZIP, GZIP, NONE]
    recordio("mixed.recordio", [(recs[3 * i:3 * i + 3], c, {}) for i, c in enumerate(codes)])

    # Empty records everywhere, chunks whose records are all empty, and
    # chunks with no records at all (first, in the middle and last; a snappy
    # one with and without a stream identifier).
    recordio("empty_records.recordio", [
        ([], NONE, {}),
        ([b"", b"a", b""], SNAPPY, {}),
        ([b"", b"", b""], NONE, {}),
        ([], SNAPPY, {}),
        ([b"", b"", b"", b""], SNAPPY, dict(snappy_extras=True)),
        ([], SNAPPY, dict(snappy_bare=True)),
        ([b"", b"xyz"], GZIP, {}),
        ([], GZIP, {}),
        ([b""] * 5, GZIP, {}),
        ([b"last"], NONE, {}),
        ([], NONE, {}),
    ])

    # Records over 64 KiB: the snappy stream splits into several blocks, and
    # the block boundaries fall inside records.
    large_text = b"".join(b"line %06d of a large record\n" % i for i in range(9000))
    large_random = pseudo_random_bytes(150000, seed=7)
    recordio("large.recordio", [
        ([b"before", large_text, b"after"], SNAPPY, {}),
        ([large_random], SNAPPY, dict(snappy_kinds="cu", snappy_extras=True)),
        ([large_text[:70000], b"", large_random[:66000]], GZIP, {}),
        ([large_random[:65536], large_text[:65532]], NONE, {}),
    ])

    recordio("zero_bytes.recordio", [])

    tf("basic.tfrecord", [b"", b"first", b""] + text_records(20, "tf") + binary +
       [b"", large_text, b"", large_random, b""])
    tf("zero_bytes.tfrecord", [])
    tf("only_empty.tfrecord", [b""] * 4)

    cases = make_examples()
    records = [r for r, _ in cases]
    expectations = {i: f for i, (_, f) in enumerate(cases)}
    tf("examples.tfrecord", records, expectations)
    recordio("examples.recordio", [(records[:2], SNAPPY, {}), (records[2:], GZIP, {})],
             expectations)
    return files


# ---------------------------------------------------------------------------
# Manifests.


def hex_or_dash(b):
    return b.hex() if b else "-"


def value_tokens(kind, values):
    if kind == "bytes":
        return [hex_or_dash(v) for v in values]
    if kind == "float":
        return ["%08x" % float_bits(v) for v in values]
    if kind == "int64":
        return ["%d" % v for v in values]
    assert not values
    return []


def write_manifests(outdir, files):
    lines = []
    manifest = []
    for name, fmt, _, records, layout, examples in files:
        lines.append("file %s %s %d" % (fmt, name, len(records)))
        entry = {"name": name, "format": fmt, "records": [r.hex() for r in records]}
        if layout is not None:
            lines.append(" ".join(["compressors"] + [str(c) for c, _ in layout]))
            lines.append(" ".join(["chunk_records"] + [str(n) for _, n in layout]))
            entry["chunks"] = [{"compressor": c, "records": n} for c, n in layout]
        lines += ["record " + hex_or_dash(r) for r in records]
        if examples:
            entry["examples"] = []
            for index, features in sorted(examples.items()):
                lines.append("example %d %d" % (index, len(features)))
                decoded = {}
                for key, (kind, values) in sorted(features.items()):
                    tokens = value_tokens(kind, values)
                    lines.append(" ".join(["feature", hex_or_dash(key.encode("utf-8")), kind,
                                           str(len(values))] + tokens))
                    decoded[key] = {"kind": kind, "values": tokens}
                entry["examples"].append({"record": index, "features": decoded})
        lines.append("end")
        manifest.append(entry)
    with open(os.path.join(outdir, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump({"files": manifest}, f, indent=1)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: make_compat_files.py OUTDIR\n")
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    files = make_files()
    for name, _, data, _, _, _ in files:
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
    write_manifests(outdir, files)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
