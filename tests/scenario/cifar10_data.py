"""Small data sets in CIFAR-10's binary format, for scenario tests.

The real CIFAR-10 cannot be downloaded where the tests run. write_binary writes
the six files of the "CIFAR-10 binary version" (data_batch_1.bin ...
data_batch_5.bin, test_batch.bin, batches.meta.txt): records of one label byte
then 3072 pixel bytes, the red plane, the green plane, the blue plane, each
32x32 row-major.

The images are learnable, not noise: class k has its own colour and stripes
(horizontal for even k, vertical for odd k, of a period that grows with k),
under per-pixel noise and a per-image brightness shift, so that a short
training well above chance (0.1) shows that labels and pixels arrive where the
model expects them.
"""
import os
import random

SIDE = 32
PLANE = SIDE * SIDE
RECORD_BYTES = 1 + 3 * PLANE
TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
TEST_FILE = "test_batch.bin"
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck"]

# (red, green, blue) of each class.
_COLOURS = [(220, 40, 40), (40, 200, 40), (40, 60, 220), (220, 220, 40), (200, 40, 200),
            (40, 200, 200), (240, 140, 20), (120, 60, 20), (140, 140, 140), (250, 250, 250)]


def _template(label):
    """The noiseless planes of class `label`: a list of 3072 ints."""
    period = 2 + label // 2
    planes = []
    for colour in _COLOURS[label]:
        for y in range(SIDE):
            for x in range(SIDE):
                on = ((y if label % 2 == 0 else x) // period) % 2 == 0
                planes.append(colour if on else colour // 3)
    return planes


_TEMPLATES = [_template(k) for k in range(10)]


def record(label, rng, noise=40):
    """One binary record of class `label`: the label byte and 3072 pixel bytes."""
    shift = rng.randint(-25, 25)
    noise_bytes = rng.randbytes(3 * PLANE)
    pixels = bytes(min(255, max(0, t + shift + n % (2 * noise + 1) - noise))
                   for t, n in zip(_TEMPLATES[label], noise_bytes))
    return bytes([label]) + pixels


def hwc(record_bytes):
    """The pixels of a binary record in HWC order (row, column, channel), as ints."""
    pixels = record_bytes[1:]
    return [pixels[c * PLANE + p] for p in range(PLANE) for c in range(3)]


def write_binary(directory, train_per_file, test_records, seed=0):
    """Writes the six .bin files and batches.meta.txt into `directory`.

    Labels cycle through the classes in a shuffled order. Returns
    {file name: [record bytes, ...]} for the six files.
    """
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    written = {}
    for name, n in [(f, train_per_file) for f in TRAIN_FILES] + [(TEST_FILE, test_records)]:
        labels = [i % 10 for i in range(n)]
        rng.shuffle(labels)
        records = [record(label, rng) for label in labels]
        with open(os.path.join(directory, name), "wb") as f:
            f.write(b"".join(records))
        written[name] = records
    with open(os.path.join(directory, "batches.meta.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n\n")
    return written
