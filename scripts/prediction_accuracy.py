#!/usr/bin/env python3
"""Accuracy of `elasticdl predict` output against (Fashion-)MNIST labels.

    prediction_accuracy.py PREDICTIONS.csv LABELS-idx1-ubyte.gz

PREDICTIONS.csv has a header `file,index,output_0,...` and one row per record;
the record at `index` of the test shard is the index-th test image, whose label
is read from the IDX file. Prints the accuracy as a fraction.
"""
import csv
import gzip
import struct
import sys


def read_labels(path):
    with gzip.open(path, "rb") as f:
        magic, count = struct.unpack(">II", f.read(8))
        if magic != 0x00000801:
            sys.exit(f"{path}: not an IDX label file (magic {magic:#x})")
        return f.read(count)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    labels = read_labels(sys.argv[2])
    correct = total = 0
    with open(sys.argv[1], newline="") as f:
        rows = csv.reader(f)
        header = next(rows)
        if header[:2] != ["file", "index"]:
            sys.exit(f"{sys.argv[1]}: unexpected header {header[:2]}")
        for row in rows:
            outputs = [float(v) for v in row[2:]]
            predicted = max(range(len(outputs)), key=outputs.__getitem__)
            correct += predicted == labels[int(row[1])]
            total += 1
    if total != len(labels):
        sys.exit(f"{sys.argv[1]}: {total} predictions for {len(labels)} labels")
    print(f"{correct / total:.6f}")


if __name__ == "__main__":
    main()
