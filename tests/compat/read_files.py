#!/usr/bin/python3
"""Reads a RecordIO or TFRecord file without any ElasticDL code.

Usage: read_files.py recordio|tfrecord PATH

Parses the file by hand from the format descriptions, verifying every
checksum and length on the way, and prints one line per item:
  chunk COMPRESSOR NUM_RECORDS [FRAME_TYPE ...]   (RecordIO, before its records;
                                                  FRAME_TYPE: the two-digit hex
                                                  type of each snappy framing
                                                  chunk, in order)
  record HEX                                      ("-" for an empty record)
On anything malformed it prints the reason to stderr and exits with status 1,
so compat_test.cc can check files written by our RecordWriter against an
independent reader. Only the raw snappy block codec (python3-snappy) and
CRC-32C (python3-crc32c) come from libraries.
"""

import gzip
import struct
import sys
import zlib

import crc32c
import snappy

STREAM_IDENTIFIER_BODY = b"sNaPpY"
MAX_BLOCK = 65536


class Malformed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Malformed(message)


def unmasked(masked):
    rotated = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


def check_crc32c(data, masked, what):
    check(crc32c.crc32c(data) == unmasked(masked), "%s: CRC-32C mismatch" % what)


def unframe_snappy(stream):
    """Decodes a snappy framing-format stream; returns (data, chunk types)."""
    out = bytearray()
    types = []
    pos = 0
    while pos < len(stream):
        check(len(stream) - pos >= 4, "snappy offset %d: truncated chunk header" % pos)
        chunk_type = stream[pos]
        length = int.from_bytes(stream[pos + 1:pos + 4], "little")
        body = stream[pos + 4:pos + 4 + length]
        check(len(body) == length, "snappy offset %d: truncated chunk" % pos)
        check(types or chunk_type == 0xFF, "snappy stream does not start with its identifier")
        types.append(chunk_type)
        what = "snappy offset %d" % pos
        if chunk_type == 0xFF:
            check(body == STREAM_IDENTIFIER_BODY, what + ": bad stream identifier")
        elif chunk_type in (0x00, 0x01):
            check(length >= 4, what + ": chunk shorter than its checksum")
            masked = struct.unpack("<I", body[:4])[0]
            block = snappy.decompress(body[4:]) if chunk_type == 0x00 else body[4:]
            check(len(block) <= MAX_BLOCK, what + ": block over 64 KiB")
            check_crc32c(block, masked, what)
            out += block
        else:
            check(chunk_type >= 0x80, what + ": reserved unskippable chunk type")
        pos += 4 + length
    return bytes(out), types


def read_recordio(data):
    lines = []
    pos = 0
    while pos < len(data):
        check(len(data) - pos >= 20, "offset %d: truncated chunk header" % pos)
        magic, crc, compressor, size, count = struct.unpack("<5I", data[pos:pos + 20])
        what = "chunk at offset %d" % pos
        check(magic == 0x01020304, what + ": bad magic")
        stored = data[pos + 20:pos + 20 + size]
        check(len(stored) == size, what + ": truncated payload")
        check(zlib.crc32(stored) & 0xFFFFFFFF == crc, what + ": CRC-32 mismatch")
        frame_types = []
        if compressor == 0:
            raw = stored
        elif compressor == 1:
            raw, frame_types = unframe_snappy(stored)
        elif compressor == 2:
            raw = gzip.decompress(stored)
        else:
            raise Malformed(what + ": unknown compressor %d" % compressor)
        lines.append(" ".join(["chunk", str(compressor), str(count)] +
                              ["%02x" % t for t in frame_types]))
        at = 0
        for i in range(count):
            check(len(raw) - at >= 4, what + ": record %d: truncated length" % i)
            length = struct.unpack("<I", raw[at:at + 4])[0]
            record = raw[at + 4:at + 4 + length]
            check(len(record) == length, what + ": record %d: truncated" % i)
            lines.append("record " + (record.hex() or "-"))
            at += 4 + length
        check(at == len(raw), what + ": bytes after the last record")
        pos += 20 + size
    return lines


def read_tfrecord(data):
    lines = []
    pos = 0
    while pos < len(data):
        what = "record at offset %d" % pos
        check(len(data) - pos >= 12, what + ": truncated header")
        length_bytes = data[pos:pos + 8]
        check_crc32c(length_bytes, struct.unpack("<I", data[pos + 8:pos + 12])[0],
                     what + ": length")
        length = struct.unpack("<Q", length_bytes)[0]
        check(len(data) - pos - 12 >= length + 4, what + ": truncated")
        record = data[pos + 12:pos + 12 + length]
        check_crc32c(record, struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])[0],
                     what + ": data")
        lines.append("record " + (record.hex() or "-"))
        pos += 16 + length
    return lines


def main(argv):
    if len(argv) != 3 or argv[1] not in ("recordio", "tfrecord"):
        sys.stderr.write("usage: read_files.py recordio|tfrecord PATH\n")
        return 2
    with open(argv[2], "rb") as f:
        data = f.read()
    try:
        lines = read_recordio(data) if argv[1] == "recordio" else read_tfrecord(data)
    except (Malformed, OSError, EOFError, zlib.error, snappy.UncompressError) as e:
        sys.stderr.write("%s: %s\n" % (argv[2], e))
        return 1
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
