"""Small Fashion-MNIST record files for scenario tests, written without ElasticDL.

Reads the IDX files that Debian ships (/usr/share/datasets/fashion-mnist) and
writes tf.train.Example records (image float[28,28] with values 0-255, label
int64[1]: what `elasticdl data mnist` writes) into uncompressed RecordIO
files, so that a test knows every label without a reader of its own and the
job under test reads files that its own writer did not produce.

The wire encoding comes from tests/compat/make_compat_files.py, the
independent writer the compatibility tests check our readers against.
"""
import gzip
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
from make_compat_files import NONE, length_delimited, map_entry, recordio_chunk, varint  # noqa: E402

MNIST_DIR = "/usr/share/datasets/fashion-mnist"
SPLITS = {"train": "train", "test": "t10k"}
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


_PACK_IMAGE = struct.Struct(f"<{IMAGE_PIXELS}f").pack


def example(pixels, label):
    """The serialized Example of one image: image float_list[784], label int64_list[1]."""
    image = length_delimited(2, length_delimited(1, _PACK_IMAGE(*pixels)))
    label_feature = length_delimited(3, length_delimited(1, varint(label)))
    return length_delimited(1, map_entry("image", image) + map_entry("label", label_feature))


def recordio(records, records_per_chunk=256):
    """RecordIO bytes: uncompressed chunks of at most records_per_chunk records."""
    return b"".join(recordio_chunk(records[i:i + records_per_chunk], NONE)
                    for i in range(0, len(records), records_per_chunk))


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
