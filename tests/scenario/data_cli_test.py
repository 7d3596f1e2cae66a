"""Scenario tests for `elasticdl data`: the real binary, real files.

Run by CTest with ELASTICDL_BIN pointing at the built executable.
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

import cifar10_data

BIN = os.environ.get("ELASTICDL_BIN", "build/bin/elasticdl")
MNIST = "/usr/share/datasets/fashion-mnist"


def run(*args, check=True):
    proc = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


class DataCliTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="elasticdl-scenario-")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def mnist_subset(self, limit=500, per_shard=200):
        out = self.path("fmnist")
        proc = run("data", "mnist", "--output", out, f"--limit={limit}",
                   f"--records_per_shard={per_shard}")
        self.assertIn(f"wrote {limit} training and {limit} test examples", proc.stdout)
        return out

    def test_mnist_import_shards_and_inspect(self):
        out = self.mnist_subset()
        shards = sorted(os.listdir(os.path.join(out, "train")))
        self.assertEqual(shards, [f"data-0000{i}-of-00003.recordio" for i in range(3)])
        report = run("data", "inspect", os.path.join(out, "train", shards[2]),
                     "--records=1").stdout
        self.assertIn("records:  100", report)
        self.assertIn("snappy", report)
        self.assertIn("image: float_list[784]", report)
        self.assertIn("label: int64_list[1]", report)
        self.assertIn("max 255", report)

    def test_inspect_a_directory_lists_every_file(self):
        out = self.mnist_subset()
        train = os.path.join(out, "train")
        report = run("data", "inspect", train, "--records=1").stdout
        self.assertIn("files:    3\n", report)
        self.assertIn("records:  500 in 3 readable files", report)
        counts = re.findall(r"^ +(\d+)  RecordIO .*  (data-\d+-of-00003\.recordio)$", report, re.M)
        self.assertEqual(counts, [("200", "data-00000-of-00003.recordio"),
                                  ("200", "data-00001-of-00003.recordio"),
                                  ("100", "data-00002-of-00003.recordio")])
        self.assertIn("record 0 (", report)
        self.assertIn("label: int64_list[1]", report)
        # A glob, as --training_data takes it.
        report = run("data", "inspect", os.path.join(train, "*0000[12]*"), "-n", "0").stdout
        self.assertIn("records:  300 in 2 readable files", report)
        self.assertNotIn("record 0 (", report)
        # A file training would stop at is listed with its error, and fails the command.
        with open(os.path.join(train, "notes.recordio"), "wb") as f:
            f.write(b"not a record file")
        proc = run("data", "inspect", train, "-n", "0", check=False)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("records:  500 in 3 readable files", proc.stdout)
        self.assertRegex(proc.stdout, r"  notes\.recordio: offset 0: .+")
        self.assertIn("notes.recordio", proc.stderr)

    def inspected_images(self, path, count):
        """(label, image values) of the first `count` records of a file, read by `data inspect`."""
        report = run("data", "inspect", path, f"--records={count}", "--max_values=3072").stdout
        found = re.findall(r"^  image: float_list\[3072\] \{([^}]*)\}\n  label: int64_list\[1\] "
                           r"\{(\d+)\}$", report, re.M)
        self.assertEqual(len(found), count, report[:2000])
        return [(int(label), [int(float(v)) for v in values.split(", ")])
                for values, label in found]

    def test_cifar10_import_writes_hwc_images_and_labels(self):
        src, out = self.path("cifar-10-batches-bin"), self.path("cifar10")
        written = cifar10_data.write_binary(src, train_per_file=6, test_records=5, seed=1)
        proc = run("data", "cifar10", "--source", src, "--output", out,
                   "--records_per_shard=8")
        self.assertIn(f"wrote 30 training and 5 test examples from {src} into 5 files under {out}",
                      proc.stdout)
        self.assertEqual(sorted(os.listdir(os.path.join(out, "train"))),
                         [f"data-0000{i}-of-00004.recordio" for i in range(4)])
        self.assertEqual(os.listdir(os.path.join(out, "test")), ["data-00000-of-00001.recordio"])
        # The training files in order: shard 2 starts with record 16, the 5th of data_batch_3.
        train = self.inspected_images(
            os.path.join(out, "train", "data-00002-of-00004.recordio"), 8)
        test = self.inspected_images(os.path.join(out, "test", "data-00000-of-00001.recordio"), 5)
        expected_train = written["data_batch_3.bin"][4:] + written["data_batch_4.bin"][:2]
        pairs = list(zip(train, expected_train)) + list(zip(test, written["test_batch.bin"]))
        for (label, image), raw in pairs:
            self.assertEqual(label, raw[0])
            self.assertEqual(image, cifar10_data.hwc(raw))
        # HWC spelled out: (row 3, column 5) of the first test image is at 3 * 96 + 5 * 3.
        raw = written["test_batch.bin"][0]
        self.assertEqual(test[0][1][3 * 96 + 5 * 3:3 * 96 + 5 * 3 + 3],
                         [raw[1 + 3 * 32 + 5], raw[1 + 1024 + 3 * 32 + 5],
                          raw[1 + 2048 + 3 * 32 + 5]])

        # --input is --source's other name; --limit takes the first records of each split.
        proc = run("data", "cifar10", "--input", src, "--output", self.path("few"), "--limit=7",
                   "--records_per_shard=0", "--to=tfrecord")
        self.assertIn("wrote 7 training and 5 test examples", proc.stdout)
        self.assertEqual(os.listdir(os.path.join(self.path("few"), "train")), ["data.tfrecord"])

    def test_cifar10_errors_name_the_file_and_record(self):
        src = self.path("src")
        written = cifar10_data.write_binary(src, train_per_file=3, test_records=3)

        def fails(*fragments):
            out = self.path("out")
            proc = run("data", "cifar10", "--source", src, "--output", out, check=False)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            for fragment in fragments:
                self.assertIn(fragment, proc.stderr)
            self.assertFalse(any(files for _, _, files in os.walk(out)), "output left behind")

        bad = bytearray(written["data_batch_2.bin"][1])
        bad[0] = 12
        with open(os.path.join(src, "data_batch_2.bin"), "r+b") as f:
            f.seek(3073)
            f.write(bad)
        fails(f"error: {src}/data_batch_2.bin: record 1 (byte offset 3073): label 12 is not in 0..9")

        with open(os.path.join(src, "test_batch.bin"), "ab") as f:
            f.write(b"\x01" * 100)
        fails(f"error: {src}/test_batch.bin: truncated: 9319 bytes is not a whole number of "
              "3073-byte records; record 3 has only 100 bytes")

        os.remove(os.path.join(src, "data_batch_5.bin"))
        os.remove(os.path.join(src, "test_batch.bin"))
        fails(f"error: {src}: missing data_batch_5.bin, test_batch.bin")

    def test_convert_round_trip_is_byte_identical(self):
        out = self.mnist_subset(limit=300, per_shard=0)
        src = os.path.join(out, "train", "data.recordio")
        a, b, c = self.path("a.recordio"), self.path("b.tfrecord"), self.path("c.recordio")
        # Exactly as written: formats from the extensions.
        run("data", "convert", src, a, "--compressor=none")
        run("data", "convert", a, b)
        run("data", "convert", b, c, "--compressor", "none")
        with open(a, "rb") as fa, open(c, "rb") as fc:
            self.assertEqual(fa.read(), fc.read())
        tf = run("data", "inspect", b, "-n", "0").stdout
        self.assertIn("format:   TFRecord", tf)
        self.assertIn("records:  300", tf)

    def test_convert_sharding_and_format_override(self):
        out = self.mnist_subset(limit=250, per_shard=0)
        src = os.path.join(out, "test", "data.recordio")
        proc = run("data", "convert", src, self.path("shards.bin"), "--to=tfrecord",
                   "--records_per_shard=100")
        self.assertIn("into 3 files", proc.stdout)
        counts = []
        for i in range(3):
            shard = self.path(f"shards-0000{i}-of-00003.bin")
            report = run("data", "inspect", shard, "--format=tfrecord", "-n", "0").stdout
            counts.append(int(report.split("records:")[1].split()[0]))
        self.assertEqual(counts, [100, 100, 50])

    def test_validate_reports_flipped_byte_and_truncation(self):
        out = self.mnist_subset(limit=400, per_shard=0)
        good = self.path("good.recordio")
        run("data", "convert", os.path.join(out, "train", "data.recordio"), good,
            "--chunk_bytes=200000")
        with open(good, "rb") as f:
            data = bytearray(f.read())
        flipped, truncated = self.path("flipped.recordio"), self.path("truncated.recordio")
        data[len(data) // 2] ^= 0x10
        with open(flipped, "wb") as f:
            f.write(data)
        data[len(data) // 2] ^= 0x10
        with open(truncated, "wb") as f:
            f.write(data[: len(data) - 1000])

        ok = run("data", "validate", good)
        self.assertIn("ok, 400 records", ok.stdout)

        proc = run("data", "validate", good, flipped, truncated, check=False)
        self.assertNotEqual(proc.returncode, 0)
        lines = proc.stdout.splitlines()
        flip_lines = [l for l in lines if l.startswith(flipped + ": offset ")]
        self.assertEqual(len(flip_lines), 1, proc.stdout)
        self.assertIn("checksum mismatch", flip_lines[0])
        trunc_lines = [l for l in lines if l.startswith(truncated + ": offset ")]
        self.assertEqual(len(trunc_lines), 1, proc.stdout)
        self.assertIn("truncated", trunc_lines[0])

        # The offsets are real: the flipped chunk starts at or before the flip.
        offset = int(flip_lines[0].split(": offset ")[1].split(":")[0])
        self.assertLessEqual(offset, len(data) // 2)

        # Reading the damaged file stops with the same diagnosis, never silently.
        proc = run("data", "convert", flipped, self.path("x.tfrecord"), check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(flipped, proc.stderr)
        self.assertIn("checksum mismatch", proc.stderr)
        self.assertFalse(os.path.exists(self.path("x.tfrecord")))
        self.assertFalse(os.path.exists(self.path("x.tfrecord.partial")))

    def test_validate_tfrecord(self):
        out = self.mnist_subset(limit=100, per_shard=0)
        tf = self.path("t.tfrecord")
        run("data", "convert", os.path.join(out, "test", "data.recordio"), tf)
        with open(tf, "rb") as f:
            data = bytearray(f.read())
        data[5000] ^= 1
        with open(tf, "wb") as f:
            f.write(data)
        proc = run("data", "validate", tf, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertRegex(proc.stdout, r"t\.tfrecord: offset \d+: record 1: data checksum mismatch")

    def test_csv_to_examples(self):
        csv = self.path("people.csv")
        with open(csv, "w") as f:
            f.write('name,age,height,note\n"Ada, Countess",36,1.65,"said ""hi"""\nBob,41,,x\n')
        out = self.path("people.recordio")
        proc = run("data", "convert", csv, out)
        self.assertIn("converted 2 records", proc.stdout)
        report = run("data", "inspect", out).stdout
        self.assertIn('name: bytes_list[1] {"Ada, Countess"}', report)
        self.assertIn("age: int64_list[1] {36}", report)
        self.assertIn("height: float_list[1] {1.65}", report)
        self.assertIn('note: bytes_list[1] {"said \\"hi\\""}', report)
        # Bob has no height: the feature is left out of his example.
        second = report.split("record 1")[1]
        self.assertNotIn("height", second)

        proc = run("data", "convert", csv, self.path("typed.recordio"),
                   "--csv_types=age:float", "--to=recordio")
        self.assertIn("age: float_list[1] {36}", run("data", "inspect",
                                                      self.path("typed.recordio")).stdout)

    def test_csv_errors_name_file_and_row(self):
        bad = self.path("bad.csv")
        with open(bad, "w") as f:
            f.write("a,b\n1,2\n3\n")
        proc = run("data", "convert", bad, self.path("bad.recordio"), check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(f"{bad}: row 3: expected 2 fields, found 1", proc.stderr)
        self.assertFalse(os.path.exists(self.path("bad.recordio")))
        latin1 = self.path("latin1.csv")
        with open(latin1, "wb") as f:
            f.write(b"name,h\xe9ight\nAda,1\n")
        proc = run("data", "convert", latin1, self.path("l.recordio"), check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(f"{latin1}: header: column 2 name is not UTF-8", proc.stderr)
        proc = run("data", "convert", self.path("people.csv"), self.path("x.recordio"),
                   "--csv_types=age:complex", check=False)
        self.assertIn("--csv_types: column type 'complex' for 'age' is unknown", proc.stderr)

    def test_sql_query_to_examples_from_sqlite(self):
        """A table made by SQLite's own client, read back through `data sql`."""
        db = self.path("hr.db")
        subprocess.run(["sqlite3", db], check=True, text=True, input="""
            CREATE TABLE employee (name TEXT, role TEXT, age INTEGER, salary REAL);
            INSERT INTO employee VALUES ('ann', 'eng', 31, 100.5), ('bob', NULL, 45, 80);
        """)
        out = self.path("employee")
        proc = run("data", "sql", f"--db=sqlite://{db}",
                   "SELECT name, role, age, salary, age * 1.5 AS score FROM employee", out)
        self.assertIn("wrote 2 examples (name:bytes_list, role:bytes_list, age:int64_list, "
                      "salary:float_list, score:float_list) into 1 file", proc.stdout)
        report = run("data", "inspect", os.path.join(out, "data.recordio")).stdout
        self.assertIn('name: bytes_list[1] {"ann"}', report)
        self.assertIn("salary: float_list[1] {80}", report)
        self.assertIn("score: float_list[1] {67.5}", report)
        self.assertNotIn("role", report.split("record 1")[1])  # NULL: left out

        for select, message in [
                ("SELECT nme FROM employee", 'query "SELECT nme FROM employee": no such column: nme'),
                ("SELECT name FROM employee WHERE age > 99", "the query returned no rows"),
                ("UPDATE employee SET age = 0", "not a query")]:
            proc = run("data", "sql", f"--db=sqlite://{db}", select, self.path("bad"), check=False)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn(message, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.path("bad"), "data.recordio")))
        proc = run("data", "sql", f"--db=sqlite://{self.path('none.db')}", "SELECT 1",
                   self.path("bad"), check=False)
        self.assertIn(f"no SQLite database at {self.path('none.db')}", proc.stderr)

    def criteo_fields(self):
        return ["label"] + [f"I{i}" for i in range(1, 14)] + [f"C{i}" for i in range(1, 27)]

    def test_criteo_synth_then_import(self):
        src = self.path("criteo")  # made by the command, as the other data commands do
        train, test = os.path.join(src, "train.tsv"), self.path("test.tsv")
        proc = run("data", "criteo_synth", train, "--records=3000", "--seed=5",
                   "--test_records=500", "--test_output", test)
        self.assertIn(f"wrote 3000 lines to {train}: click rate", proc.stdout)
        self.assertIn(f"wrote 500 lines to {test}", proc.stdout)
        with open(train + ".truth.json") as f:
            truth = json.load(f)
        self.assertEqual(truth["records"], 3000)
        self.assertEqual(truth["seed"], 5)
        self.assertTrue(0.18 < truth["click_rate"] < 0.32, truth)
        self.assertTrue(0.72 < truth["optimum_auc"] < 0.9, truth)
        self.assertLess(truth["optimum_log_loss"], truth["constant_log_loss"])
        self.assertEqual(truth["categorical"]["C9"]["vocabulary"], 3)
        with open(train) as f:
            lines = f.read().split("\n")
        self.assertEqual(lines[-1], "")
        lines = lines[:-1]
        self.assertEqual(len(lines), 3000)
        self.assertEqual(sum(int(l.split("\t")[0]) for l in lines), truth["clicks"])
        # The same seed writes the same bytes.
        again = self.path("again.tsv")
        run("data", "criteo_synth", again, "--records=3000", "--seed=5")
        with open(train, "rb") as a, open(again, "rb") as b:
            self.assertEqual(a.read(), b.read())

        # A directory source: its .truth.json is left out.
        out = self.path("criteo_out")
        proc = run("data", "criteo", src, out, "--records_per_shard=1000")
        self.assertIn(f"wrote 3000 examples from 1 file into 3 files under {out}", proc.stdout)
        self.assertEqual(sorted(os.listdir(out)),
                         [f"data-0000{i}-of-00003.recordio" for i in range(3)])
        report = run("data", "inspect", os.path.join(out, "data-00001-of-00003.recordio"),
                     "-n", "2").stdout
        self.assertIn("records:  1000", report)
        # Record 1 of the second shard is line 1002: every field of the line
        # is a feature of that name, every empty field is left out.
        record = report.split("record 1 (")[1]
        shown = dict(re.findall(r"^  (\w+): (.*)$", record, re.M))
        fields = lines[1001].split("\t")
        self.assertEqual(len(fields), 40)
        for name, value in zip(self.criteo_fields(), fields):
            if value == "":
                self.assertNotIn(name, shown)
            elif name.startswith("C"):
                self.assertRegex(value, r"^[0-9a-f]{8}$")
                self.assertEqual(shown[name], f'bytes_list[1] {{"{value}"}}')
            else:
                self.assertEqual(shown[name], f"int64_list[1] {{{value}}}")

        # The held-out file imports too, as TFRecord.
        proc = run("data", "criteo", test, self.path("test_out"), "--format=tfrecord",
                   "--records_per_shard=0")
        self.assertIn("wrote 500 examples from 1 file into 1 file", proc.stdout)
        report = run("data", "inspect", self.path("test_out/data.tfrecord"), "-n", "1").stdout
        self.assertIn("records:  500", report)
        self.assertIn("label: int64_list[1]", report)

    def test_criteo_errors_name_file_line_and_field(self):
        good = "\t".join(["1"] + ["3"] * 13 + ["68fd1e64"] * 26)
        fields = good.split("\t")
        cases = [
            ("short.tsv", "\t".join(fields[:39]),
             "short.tsv: line 3: found 39 tab-separated fields, expected 40"),
            ("label.tsv", "\t".join(["2"] + fields[1:]),
             "label.tsv: line 3: field label: '2' is not 0 or 1"),
            ("int.tsv", "\t".join(fields[:5] + ["4.5"] + fields[6:]),
             "int.tsv: line 3: field I5: '4.5' is not an integer"),
        ]
        for name, bad, message in cases:
            src = self.path(name)
            with open(src, "w") as f:
                f.write(f"{good}\n{good.replace('3', '-1', 1)}\n{bad}\n{good}\n")
            out = self.path(name + ".out")
            proc = run("data", "criteo", src, out, "--records_per_shard=2", check=False)
            self.assertEqual(proc.returncode, 1, name)
            self.assertIn(f"error: {self.dir}/{message}", proc.stderr)
            self.assertEqual(os.listdir(out), [])

        proc = run("data", "criteo", self.path("nowhere"), self.path("o"), check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("nowhere: no such file or directory", proc.stderr)
        proc = run("data", "criteo_synth", self.path("s.tsv"), "--records=10",
                   "--test_records=5", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("--test_records and --test_output go together", proc.stderr)
        self.assertFalse(os.path.exists(self.path("s.tsv")))
        proc = run("data", "criteo_synth", self.path("s.tsv"), "--records=0", check=False)
        self.assertNotEqual(proc.returncode, 0)
        # Not taken modulo 2^64.
        proc = run("data", "criteo_synth", self.path("s.tsv"), "--records=10", "--seed=-1",
                   check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--seed: expected a non-negative integer, got -1", proc.stderr)
        self.assertFalse(os.path.exists(self.path("s.tsv")))

    def test_clear_errors_for_bad_arguments(self):
        cases = [
            (["data", "convert", self.path("missing.recordio"), self.path("o.recordio")],
             "missing.recordio: cannot open: No such file or directory"),
            (["data", "convert", "in.dat", self.path("o.recordio")],
             "in.dat: cannot tell the record format from the name"),
            (["data", "inspect", self.path("x.recordio"), "--format=parquet"],
             "unknown record format 'parquet'"),
            (["data", "mnist", "--output", self.path("m"), "--source", self.path("nowhere")],
             "nowhere/train-images-idx3-ubyte.gz: cannot open"),
        ]
        for args, message in cases:
            proc = run(*args, check=False)
            self.assertEqual(proc.returncode, 1, args)
            self.assertIn(message, proc.stderr, args)
        out = self.mnist_subset(limit=10, per_shard=0)
        proc = run("data", "convert", os.path.join(out, "test", "data.recordio"),
                   self.path("o.recordio"), "--compressor=lz4", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("unknown compressor 'lz4', expected none, snappy or gzip", proc.stderr)
        usage = run("data", "frobnicate", check=False)
        self.assertNotEqual(usage.returncode, 0)

    def test_a_command_line_cli11_refuses_says_what_was_meant(self):
        """Misspelled commands and options, and a value of the wrong type: one
        `error:` line that says what was meant or expected, exit status 1."""
        cases = [
            (["trian"], "error: 'trian' is not a command (did you mean train?)"),
            # The unknown option, not the required one CLI11 finds missing first.
            (["train", "--minibach_size=32", "--model_zoo=z"],
             "error: 'train' takes no option --minibach_size (did you mean --minibatch_size?)"),
            (["data", "mnist", "--outptu", self.path("m")],
             "error: 'mnist' takes no option --outptu (did you mean --output?)"),
            (["train", "--model_zoo=z", "--model_def=m", "--training_data=d", "--num_epochs=abc"],
             "error: Could not convert: --num_epochs = abc (expected an integer)"),
            (["train", "--model_zoo=z", "--model_def=m", "--training_data=d", "--seed=abc"],
             "error: Could not convert: --seed = abc (expected a non-negative integer)"),
            (["data", "mnsit", "--output", self.path("m")],
             "error: 'mnsit' is not a command of 'data' (did you mean mnist?)"),
            # A value that looks like an option is the value of the option before it.
            (["train", "--model_zoo", "--z", "--minibach_size=3"],
             "error: 'train' takes no option --minibach_size (did you mean --minibatch_size?)"),
            (["train", "--model_zoo=z"], "error: --model_def is required"),
        ]
        for args, message in cases:
            proc = run(*args, check=False)
            self.assertEqual(proc.returncode, 1, args)
            self.assertEqual(proc.stderr.splitlines()[0], message, args)
        self.assertEqual(run("--help").returncode, 0)


if __name__ == "__main__":
    unittest.main()
