"""Small Fashion-MNIST record files for scenario tests, written without ElasticDL.

Reads the IDX files that Debian ships (/usr/share/datasets/fashion-mnist) and
writes tf.train.Example records (image float[28,28] with values 0-255, label
int64[1]: what `elasticdl data mnist` writes) into uncompressed RecordIO
files, so that a test knows every label without a reader of its own and the
job under test reads files that its own writer did not produce.

Standard library only (Debian's /usr/bin/python3).
"""
import gzip
import os
import struct
import zlib

MNIST_DIR = "/usr/share/datasets/fashion-mnist"
SPLITS = {"train": "train", "test": "t10k"}
RECORDIO_MAGIC = 0x01020304
IMAGE_PIXELS = 28 * 28


def read_idx(split, start, count, source=MNIST_DIR):
    """Images [start, start+count) of a split: a list of (pixels, label).

    pixels is the 784-byte row-major image, label an int in 0..9.
    """
    prefix = os.path.join(source, SPLITS[split])
    with gzip.open(prefix + "-images-idx3-ubyte.gz", "rb") as f:
        magic, n, rows, cols = struct.unpack(">4I", f.read(16))
        assert magic == 0x803 and rows * cols == IMAGE_PIXELS, (magic, rows, cols)
        assert start + count <= n, (start, count, n)
        f.read(start * IMAGE_PIXELS)
        images = f.read(count * IMAGE_PIXELS)
    with gzip.open(prefix + "-labels-idx1-ubyte.gz", "rb") as f:
        magic, n = struct.unpack(">2I", f.read(8))
        assert magic == 0x801, magic
        f.read(start)
        labels = f.read(count)
    return [(images[i * IMAGE_PIXELS:(i + 1) * IMAGE_PIXELS], labels[i])
            for i in range(count)]


# tf.train.Example in the protobuf wire format:
#   Example { Features features = 1; }  Features { map<string, Feature> feature = 1; }
#   Feature { oneof { BytesList = 1; FloatList float_list = 2; Int64List int64_list = 3; } }


def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number, payload):
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _map_entry(key, feature):
    return _field(1, _field(1, key.encode()) + _field(2, feature))


_PACK_IMAGE = struct.Struct(f"<{IMAGE_PIXELS}f").pack


def example(pixels, label):
    """The serialized Example of one image: image float_list[784], label int64_list[1]."""
    image = _field(2, _field(1, _PACK_IMAGE(*pixels)))
    label_feature = _field(3, _field(1, _varint(label)))
    return _field(1, _map_entry("image", image) + _map_entry("label", label_feature))


def recordio(records, records_per_chunk=256):
    """RecordIO bytes: uncompressed chunks of at most records_per_chunk records."""
    out = bytearray()
    for i in range(0, len(records), records_per_chunk):
        chunk = records[i:i + records_per_chunk]
        payload = b"".join(struct.pack("<I", len(r)) + r for r in chunk)
        out += struct.pack("<5I", RECORDIO_MAGIC, zlib.crc32(payload) & 0xFFFFFFFF, 0,
                           len(payload), len(chunk))
        out += payload
    return bytes(out)


def write_subset(path, split, start, count):
    """Writes images [start, start+count) of a split to a RecordIO file at path.

    Returns the labels, in record order.
    """
    images = read_idx(split, start, count)
    data = recordio([example(pixels, label) for pixels, label in images])
    with open(path + ".partial", "wb") as f:
        f.write(data)
    os.replace(path + ".partial", path)
    return [label for _, label in images]
