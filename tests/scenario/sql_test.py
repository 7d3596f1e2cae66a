"""SQL users: `elasticdl sql` with TRAIN and PREDICT on real databases.

SQLite files made with Python's sqlite3 module, and a PostgreSQL server the
test starts itself (Debian's postgresql: initdb and pg_ctl in a temporary
directory, on a loopback port) and stops. The data: Fisher's Iris data
(tests/data/iris.csv, as scikit-learn ships it) and a generated `employee`
table whose salary is linear in age, years and role plus Gaussian noise of
known deviation, so that the noise is the best any model can do.
"""
import csv
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import unittest

import exactness

BIN = os.environ.get("ELASTICDL_BIN", "elasticdl")
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")

NOISE = 3000.0  # the salary's noise: a perfect model's RMSE
ROLES = {"engineer": 20000, "manager": 35000, "analyst": 10000, "sales": 5000, "support": 0}


def employees(n, seed):
    """Rows (name, age, years, role, dept, salary) of the generated table."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        age = rng.randint(22, 64)
        years = rng.randint(0, min(30, age - 22))
        role = rng.choice(sorted(ROLES))
        dept = rng.choice(["north", "south", "east", "west"])  # no effect
        salary = 30000 + 1500 * years + 300 * age + ROLES[role] + rng.gauss(0, NOISE)
        rows.append((f"person{seed}_{i}", age, years, role, dept, round(salary, 2)))
    return rows


def iris_rows():
    with open(os.path.join(DATA, "iris.csv"), newline="") as f:
        reader = csv.reader(f)
        next(reader)
        return [(float(a), float(b), float(c), float(d), cls) for a, b, c, d, cls in reader]


def run(*args, check=True, timeout=600):
    proc = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"elasticdl {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def rmse(pairs):
    return math.sqrt(sum((a - b) ** 2 for a, b in pairs) / len(pairs))


TRAIN_SALARY = ("SELECT age, years, role, dept, salary FROM employee "
                "TRAIN {model} WITH {params}train.batch_size=32 "
                "COLUMN age, years, role, dept LABEL salary INTO salary_model")
PREDICT_SALARY = ("SELECT name, age, years, role, dept FROM newcomer "
                  "PREDICT newcomer_salary.predicted_salary USING salary_model")
TRAIN_IRIS = ("SELECT * FROM iris_train TRAIN {model} WITH {params}train.epoch=40, "
              "train.batch_size=16 LABEL class INTO iris_model")
PREDICT_IRIS = "SELECT * FROM iris_test PREDICT iris_predicted.predicted_class USING iris_model"


class SqlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="edl-sql-")
        os.chmod(cls.tmp, 0o755)  # the PostgreSQL server's user walks into it
        iris = iris_rows()
        cls.iris_train = [r for i, r in enumerate(iris) if i % 5 != 0]
        cls.iris_test = [r for i, r in enumerate(iris) if i % 5 == 0]
        cls.employee = employees(3000, seed=1)
        cls.newcomer = employees(600, seed=2)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def sqlite_db(self, name):
        """A SQLite database holding the iris and employee tables."""
        path = self.path(name)
        if os.path.exists(path):
            os.remove(path)
        db = sqlite3.connect(path)
        for table, rows in (("iris_train", self.iris_train), ("iris_test", self.iris_test)):
            db.execute(f"CREATE TABLE {table} (sepal_length REAL, sepal_width REAL, "
                       "petal_length REAL, petal_width REAL, class TEXT)")
            db.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?)", rows)
        for table, rows in (("employee", self.employee), ("newcomer", self.newcomer)):
            db.execute(f"CREATE TABLE {table} (name TEXT, age INTEGER, years INTEGER, "
                       "role TEXT, dept TEXT, salary REAL)")
            db.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?)", rows)
        db.commit()
        db.close()
        return path

    def sql(self, db_url, statement, work, check=True, timeout=600):
        return run("sql", f"--db={db_url}", f"--work_dir={self.path(work)}", "--no_progress",
                   statement, check=check, timeout=timeout)

    # -- what the tests check ----------------------------------------------

    def assert_iris_accuracy(self, rows, minimum, what):
        """rows: (class, predicted_class) of the 30 held-out flowers."""
        self.assertEqual(len(rows), len(self.iris_test))
        accuracy = sum(a == b for a, b in rows) / len(rows)
        print(f"{what}: accuracy {accuracy:.3f} on {len(rows)} held-out flowers")
        self.assertGreaterEqual(accuracy, minimum, f"{what}: {rows}")

    def assert_salary_rmse(self, rows, what, factor):
        """rows: (name, predicted_salary); compared with the generated salaries.

        The RMSE must stay within `factor` times the noise. Measured over seeds 1-5 with
        1 and 3 workers: regressor.Linear 2906-3050 (20 epochs), regressor.DNN 2912-3301
        (40 epochs; with 20, up to 4615: the end of an epoch still jitters).
        """
        truth = {r[0]: r[5] for r in self.newcomer}
        self.assertEqual(sorted(n for n, _ in rows), sorted(truth))
        error = rmse([(truth[n], p) for n, p in rows])
        spread = rmse([(r[5], sum(t[5] for t in self.newcomer) / len(self.newcomer))
                       for r in self.newcomer])
        print(f"{what}: RMSE {error:.0f} on {len(rows)} new rows; the noise {NOISE:.0f}, "
              f"the salaries' own deviation {spread:.0f}")
        self.assertLess(error, factor * NOISE, what)

    # -- SQLite ---------------------------------------------------------------

    def test_iris_classifiers_on_sqlite(self):
        db = self.sqlite_db("iris.db")
        for model, params, minimum in [("classifier.DNN", "hidden_units=[16, 16], ", 0.9),
                                       ("classifier.Linear", "learning_rate=0.05, ", 0.85)]:
            with self.subTest(model=model):
                proc = self.sql(f"sqlite://{db}", TRAIN_IRIS.format(model=model, params=params),
                                f"iris-train-{model}")
                self.assertIn(f"trained {len(self.iris_train) * 40} records", proc.stdout)
                self.assertIn("saved the trained model as table iris_model", proc.stdout)
                proc = self.sql(f"sqlite://{db}", PREDICT_IRIS, f"iris-predict-{model}")
                self.assertIn(f"wrote {len(self.iris_test)} rows into table iris_predicted",
                              proc.stdout)
                con = sqlite3.connect(db)
                columns = [r[1] for r in con.execute("PRAGMA table_info(iris_predicted)")]
                self.assertEqual(columns, ["sepal_length", "sepal_width", "petal_length",
                                           "petal_width", "class", "predicted_class"])
                rows = con.execute("SELECT class, predicted_class FROM iris_predicted").fetchall()
                con.close()
                self.assert_iris_accuracy(rows, minimum, f"{model} on SQLite")

    def predict_salaries(self, db, work, what, factor):
        """PREDICT_SALARY on the SQLite file db, its result table checked: every newcomer,
        the query's columns and the prediction, and the RMSE within factor times the noise."""
        proc = self.sql(f"sqlite://{db}", PREDICT_SALARY, work)
        self.assertIn(f"wrote {len(self.newcomer)} rows into table newcomer_salary",
                      proc.stdout)
        con = sqlite3.connect(db)
        schema = con.execute("SELECT sql FROM sqlite_master WHERE name = "
                             "'newcomer_salary'").fetchone()[0]
        self.assertIn('"name" TEXT, "age" INTEGER, "years" INTEGER, "role" TEXT, '
                      '"dept" TEXT, "predicted_salary" REAL', schema)
        rows = con.execute("SELECT name, predicted_salary FROM newcomer_salary").fetchall()
        con.close()
        self.assert_salary_rmse(rows, what, factor)

    def test_salary_regressors_on_sqlite(self):
        # regressor.DNN on SQLite trains (the same statement, on three workers) and
        # predicts in test_worker_killed_during_sql_training_is_exact, a worker killed
        # on the way.
        db = self.sqlite_db("hr.db")
        model, params = "regressor.Linear", "learning_rate=0.05, train.epoch=20, "
        self.sql(f"sqlite://{db}", TRAIN_SALARY.format(model=model, params=params),
                 f"salary-train-{model}")
        self.predict_salaries(db, f"salary-predict-{model}", f"{model} on SQLite", 1.1)

    def test_the_seeds_statements(self):
        """Seed 003's two statements (ten epochs added): text features only (a name per
        row, hashed; a role from a vocabulary), and a result table that replaces the
        table the query read."""
        db = self.sqlite_db("seed.db")
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE testdata AS SELECT name, role, dept FROM newcomer")
        con.commit()
        con.close()
        proc = self.sql(f"sqlite://{db}",
                        "SELECT name, role, salary FROM employee TRAIN regressor.DNN WITH "
                        "hidden_units=[10, 100, 20, 5], learning_rate=0.01, train.epoch=10 "
                        "LABEL salary INTO my_trained_model;", "seed-train")
        self.assertIn("inputs name (text, 1000 buckets), role (text, 5 values)", proc.stdout)
        self.sql(f"sqlite://{db}", "SELECT name, role FROM testdata PREDICT "
                                   "testdata.predicted_salary USING my_trained_model;",
                 "seed-predict")
        con = sqlite3.connect(db)
        columns = [r[1] for r in con.execute("PRAGMA table_info(testdata)")]
        self.assertEqual(columns, ["name", "role", "predicted_salary"])
        by_role = dict(con.execute("SELECT role, avg(predicted_salary) FROM testdata "
                                   "GROUP BY role").fetchall())
        self.assertEqual(con.execute("SELECT count(*) FROM testdata").fetchone()[0],
                         len(self.newcomer))
        con.close()
        print(f"seed 003's statements: mean predicted salary by role {by_role}")
        self.assertEqual(sorted(by_role, key=by_role.get), sorted(ROLES, key=ROLES.get))

    def test_errors_are_clear_and_change_nothing(self):
        db = self.sqlite_db("errors.db")
        self.sql(f"sqlite://{db}", TRAIN_IRIS.format(model="classifier.Linear", params=""),
                 "errors-first-model")
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE mixed (x REAL, label)")
        con.executemany("INSERT INTO mixed VALUES (?, ?)", [(1.0, 1), (2.0, 2), (3.0, "three")])
        con.commit()
        con.close()

        def contents():
            con = sqlite3.connect(db)
            tables = [r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            data = {t: con.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}
            con.close()
            return data
        before = contents()
        url = f"sqlite://{db}"
        cases = [
            (url, "SELECT * FROM iris_train TRAIN classifier.DNN WITH hidden_units=[10,, 20] "
                  "LABEL class INTO iris_model",
             "syntax error: expected a value (a number, a 'string', a name or a [list]), found ',', at line 1, column 69"),
            (url, TRAIN_IRIS.format(model="classifier.Forest", params=""),
             "unknown model 'classifier.Forest': the models are regressor.DNN, regressor.Linear, "
             "classifier.DNN, classifier.Linear"),
            (url, "SELECT * FROM iris_train TRAIN classifier.DNN LABEL klass INTO iris_model",
             "LABEL 'klass' is not a column of the query; it selects sepal_length, sepal_width, "
             "petal_length, petal_width, class"),
            (url, "SELECT * FROM iris_train TRAIN classifier.DNN COLUMN sepal_length, petals "
                  "LABEL class INTO iris_model", "COLUMN 'petals' is not a column of the query"),
            (url, "SELECT * FROM mixed TRAIN classifier.DNN LABEL label INTO iris_model",
             "the label 'label' mixes types: row 1 holds a number and row 3 text"),
            (url, "SELECT * FROM iris_train WHERE 0 TRAIN classifier.DNN LABEL class "
                  "INTO iris_model", "the query returned no rows"),
            (url, "SELECT * FROM iris_train TRAIN regressor.DNN LABEL class INTO iris_model",
             "row 1: the label 'class' holds 'setosa'; regressor.DNN predicts numbers"),
            (url, "SELECT * FROM iris_train TRAIN classifier.DNN WITH depth=3 LABEL class "
                  "INTO iris_model", "WITH depth: unknown; the statement takes classifier.DNN's "
                                     "parameters hidden_units, embedding_dim"),
            (url, "SELECT * FROM iris_train TRAIN classifier.DNN WITH train.num_workers=0 "
                  "LABEL class INTO iris_model", "--num_workers"),
            (url, "SELECT * FROM iris_train TRAIN classifier.DNN WITH hidden_units=[0] "
                  "LABEL class INTO iris_model", "hidden_units: widths must be positive"),
            (url, "SELECT * FROM iris_test PREDICT iris_test.p USING no_such_model",
             "cannot read the trained model 'no_such_model' from"),
            (url, "SELECT sepal_length FROM iris_test PREDICT iris_predicted.p USING iris_model",
             "the model's input 'sepal_width' is not a column of the query"),
            (url, "SELECT * FROM iris_test PREDICT iris_predicted.class USING iris_model",
             "the query already selects a column named 'class'"),
            ("postgresql://edl@127.0.0.1:1/postgres", TRAIN_IRIS.format(model="classifier.DNN",
                                                                        params=""),
             "cannot connect to PostgreSQL at postgresql://edl@127.0.0.1:1/postgres"),
            (f"sqlite://{self.path('none.db')}", PREDICT_IRIS,
             f"no SQLite database at {self.path('none.db')}"),
        ]
        for i, (db_url, statement, message) in enumerate(cases):
            with self.subTest(statement=statement):
                proc = self.sql(db_url, statement, f"errors-{i}", check=False)
                self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertEqual(contents(), before, "the database changed")

    def test_names_are_names_and_queries_only_read(self):
        """Table and column names that hold SQL are quoted as names; the user's query runs
        once, as one read-only statement: nothing else in the database changes."""
        db = self.sqlite_db("names.db")
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE salaries (x REAL)")
        con.execute("INSERT INTO salaries VALUES (1.5)")
        con.commit()
        con.close()

        def contents(*tables):
            con = sqlite3.connect(db)
            data = {t: con.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall() for t in tables}
            con.close()
            return data
        tables = ("iris_train", "iris_test", "employee", "newcomer", "salaries")
        before = contents(*tables)
        url = f"sqlite://{db}"
        refused = [
            ("WITH d AS (DELETE FROM salaries RETURNING 1) SELECT * FROM iris_train TRAIN "
             "classifier.Linear LABEL class INTO m4", "query"),
            ("SELECT * FROM iris_train; DELETE FROM salaries; SELECT * FROM iris_train TRAIN "
             "classifier.Linear LABEL class INTO m5", "one statement expected"),
        ]
        for i, (statement, message) in enumerate(refused):
            with self.subTest(statement=statement):
                proc = self.sql(url, statement, f"names-refused-{i}", check=False)
                self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertEqual(contents(*tables), before)
        self.sql(url, "SELECT * FROM iris_train TRAIN classifier.Linear WITH train.epoch=2 "
                      'LABEL class INTO "m; DROP TABLE salaries"', "names-train")
        proc = self.sql(url, 'SELECT * FROM iris_test PREDICT "my preds"."the class" '
                             'USING "m; DROP TABLE salaries"', "names-predict")
        self.assertIn(f"wrote {len(self.iris_test)} rows into table my preds", proc.stdout)
        self.assertEqual(contents(*tables), before)
        con = sqlite3.connect(db)
        now = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = [r[1] for r in con.execute('PRAGMA table_info("my preds")')]
        con.close()
        self.assertEqual(now, set(tables) | {"my preds", "m; DROP TABLE salaries"})
        self.assertEqual(columns[-1], "the class")

    def test_worker_killed_during_sql_training_is_exact(self):
        """The statement's job is a job like any other: a worker SIGKILLed mid-task is
        replaced, its task redone, and every row trained once per epoch. The trained
        regressor.DNN (test_salary_regressors_on_sqlite's statement with three workers)
        then predicts the newcomers' salaries as well as it does without a fault."""
        db = self.sqlite_db("kill.db")
        work = self.path("kill-train")
        epochs = 40
        # Catching a worker inside a task stops workers with SIGSTOP, again and again:
        # one may fall behind enough to be replaced as a straggler, handing back part of a
        # task that the count of finished tasks below would then miss.
        statement = ("SELECT age, years, role, dept, salary FROM employee TRAIN regressor.DNN "
                     f"WITH hidden_units=[10, 100, 20, 5], train.epoch={epochs}, "
                     "train.batch_size=32, train.num_workers=3, train.num_minibatches_per_task=4, "
                     "train.straggler_factor=0 LABEL salary INTO salary_model")
        job = subprocess.Popen([BIN, "sql", f"--db=sqlite://{db}", f"--work_dir={work}",
                                "--no_progress", statement],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            log = exactness.EventLog(os.path.join(work, "job"))
            alive = lambda: job.poll() is None  # noqa: E731
            log.wait(lambda e: e.get("event") == "task_done" and "records" in e, 300,
                     "a first training task", alive)
            # Stop a worker; if it holds a task, kill it, else let it go and try again.
            held = None
            for _ in range(200):
                log.poll()
                worker = log.of("task_dispatched")[-1]["worker"]
                pid = [e["pid"] for e in log.of("worker_started") if e["worker"] == worker][-1]
                os.kill(pid, signal.SIGSTOP)
                time.sleep(0.05)
                log.poll()
                tasks = [e["task"] for e in log.of("task_dispatched") if e["worker"] == worker]
                ended = {e["task"] for e in log.events
                         if e.get("event") in ("task_done", "task_stopped")}
                if tasks and tasks[-1] not in ended:
                    held = tasks[-1]
                    os.kill(pid, signal.SIGKILL)
                    break
                os.kill(pid, signal.SIGCONT)
            self.assertIsNotNone(held, "no worker was caught holding a task")
            lost = log.wait(lambda e: e.get("event") == "worker_lost" and
                            e.get("worker") == worker, 60, f"worker_lost of worker {worker}",
                            alive)
            # It held the task it trained and, when the master had handed it out ahead,
            # the next one: every task it held and did not finish goes back.
            log.poll()
            unfinished = {e["task"] for e in log.of("task_dispatched", worker=worker)} - {
                e["task"] for e in log.events if e.get("event") in ("task_done", "task_stopped")
                and e.get("worker") == worker}
            self.assertIn(lost["requeued"], (1, 2), log.tail())
            self.assertEqual(lost["requeued"], len(unfinished), log.tail())
            stdout, stderr = job.communicate(timeout=600)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
        self.assertEqual(job.returncode, 0, stdout + stderr)
        log.poll()
        rows = len(self.employee)
        self.assertIn(f"trained {rows * epochs} records", stdout)
        self.assertIn(held, unfinished)
        for task in unfinished:
            redone = [e for e in log.of("task_dispatched") if e.get("task") == task and
                      e.get("worker") != worker]
            self.assertTrue(redone, f"task {task} of the killed worker not redone; {log.tail()}")
        self.assertTrue([e for e in log.of("worker_started") if e.get("relaunch")],
                        "no worker replaced the killed one")
        trained = sum(e["records"] for e in log.of("task_done") if "records" in e and
                      log.is_training_task(e))
        self.assertEqual(trained, rows * epochs)
        self.predict_salaries(db, "kill-predict",
                              "regressor.DNN on SQLite, a worker killed while training", 1.25)

    # -- PostgreSQL -------------------------------------------------------------

    def test_postgresql_train_then_predict_elsewhere_from_the_model_table_alone(self):
        with PostgresServer(self.path("pg")) as pg:
            for db in ("hr", "branch"):
                pg.psql("postgres", f"CREATE DATABASE {db}")
            pg.psql("hr", "CREATE TABLE employee (name text, age integer, years integer, "
                          "role text, dept text, salary double precision);"
                          "CREATE TABLE iris_train (sepal_length real, sepal_width real, "
                          "petal_length real, petal_width real, class text);")
            pg.copy("hr", "employee", self.employee)
            pg.copy("hr", "iris_train", self.iris_train)
            # The same statements as on SQLite.
            self.sql(pg.url("hr"), TRAIN_SALARY.format(
                model="regressor.DNN", params="hidden_units=[10, 100, 20, 5], train.epoch=40, "),
                "pg-salary")
            self.sql(pg.url("hr"), TRAIN_IRIS.format(
                model="classifier.DNN", params="hidden_units=[16, 16], "), "pg-iris")

            # The query runs read-only and alone; names are names.
            employees = pg.psql("hr", "SELECT count(*), sum(salary) FROM employee")
            for i, statement in enumerate([
                    "WITH d AS (DELETE FROM employee RETURNING 1) SELECT * FROM iris_train "
                    "TRAIN classifier.Linear LABEL class INTO m4",
                    "SELECT * FROM iris_train; DELETE FROM employee; SELECT * FROM iris_train "
                    "TRAIN classifier.Linear LABEL class INTO m5"]):
                proc = self.sql(pg.url("hr"), statement, f"pg-refused-{i}", check=False)
                self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
                self.assertEqual(pg.psql("hr", "SELECT count(*), sum(salary) FROM employee"),
                                 employees)
            self.sql(pg.url("hr"), "SELECT * FROM iris_train TRAIN classifier.Linear WITH "
                                   'train.epoch=2 LABEL class INTO "m; DROP TABLE employee"',
                     "pg-names")
            self.assertEqual(pg.psql("hr", "SELECT count(*), sum(salary) FROM employee"),
                             employees)
            self.assertEqual(pg.psql("hr", "SELECT count(*) > 0 FROM \"m; DROP TABLE employee\""),
                             "t")
            # A name PostgreSQL would cut to 63 bytes (two such names would be one table)
            # is refused before the training; the URL's scheme in any case.
            long_name = "a" * 63 + "_first"
            url = pg.url("hr")
            proc = self.sql("PostgreSQL" + url[url.index("://"):],
                            "SELECT * FROM iris_train TRAIN classifier.Linear LABEL class "
                            f"INTO {long_name}", "pg-long-name", check=False)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn(f"'{long_name}' is 69 bytes", proc.stdout + proc.stderr)
            self.assertEqual(pg.psql("hr", "SELECT count(*) FROM pg_tables WHERE tablename "
                                           f"LIKE '{'a' * 63}%'"), "0")

            # Another database gets the model tables only, and its own rows.
            for table in ("salary_model", "iris_model"):
                dump = subprocess.run(["pg_dump", "-t", table, pg.url("hr")], check=True,
                                      capture_output=True).stdout
                subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", pg.url("branch")],
                               input=dump, check=True, capture_output=True)
            pg.psql("branch", "CREATE TABLE newcomer (name text, age integer, years integer, "
                              "role text, dept text, salary double precision);"
                              "CREATE TABLE iris_test (sepal_length real, sepal_width real, "
                              "petal_length real, petal_width real, class text);")
            pg.copy("branch", "newcomer", self.newcomer)
            pg.copy("branch", "iris_test", self.iris_test)
            self.assertEqual(pg.psql("branch", "SELECT string_agg(tablename, ',' ORDER BY "
                                               "tablename) FROM pg_tables WHERE schemaname = "
                                               "'public'"),
                             "iris_model,iris_test,newcomer,salary_model")
            self.sql(pg.url("branch"), PREDICT_SALARY, "pg-salary-predict")
            self.sql(pg.url("branch"), PREDICT_IRIS, "pg-iris-predict")
            salaries = [line.split("|") for line in pg.psql(
                "branch", "SELECT name, predicted_salary FROM newcomer_salary").splitlines()]
            self.assert_salary_rmse([(n, float(p)) for n, p in salaries],
                                    "regressor.DNN on PostgreSQL", 1.25)
            classes = [tuple(line.split("|")) for line in pg.psql(
                "branch", "SELECT class, predicted_class FROM iris_predicted").splitlines()]
            self.assert_iris_accuracy(classes, 0.9, "classifier.DNN on PostgreSQL")


class PostgresServer:
    """A throwaway PostgreSQL server in `directory`, on a free loopback port."""

    def __init__(self, directory):
        bins = sorted(d for d in os.listdir("/usr/lib/postgresql")
                      if os.path.isdir(f"/usr/lib/postgresql/{d}/bin")) \
            if os.path.isdir("/usr/lib/postgresql") else []
        if not bins:
            raise unittest.SkipTest("no PostgreSQL server (apt-get install postgresql)")
        self.bin = f"/usr/lib/postgresql/{bins[-1]}/bin"
        self.data = directory
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        self.port = 20000 + random.randrange(20000)

    def __enter__(self):
        os.makedirs(self.data, mode=0o700)
        if os.getuid() == 0:
            shutil.chown(self.data, "postgres")
        subprocess.run([*self.as_user, f"{self.bin}/initdb", "-D", self.data, "-A", "trust",
                        "-U", "edl"], check=True, capture_output=True)
        subprocess.run([*self.as_user, f"{self.bin}/pg_ctl", "-D", self.data, "-l",
                        f"{self.data}/server.log", "-w", "-o",
                        f"-k {self.data} -c listen_addresses=127.0.0.1 -p {self.port}", "start"],
                       check=True, capture_output=True)
        return self

    def __exit__(self, *exc):
        subprocess.run([*self.as_user, f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast",
                        "stop"], capture_output=True)

    def url(self, db):
        return f"postgresql://edl@127.0.0.1:{self.port}/{db}"

    def psql(self, db, sql):
        return subprocess.run(["psql", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", self.url(db),
                               "-c", sql], check=True, capture_output=True,
                              text=True).stdout.strip()

    def copy(self, db, table, rows):
        text = "".join("\t".join(str(v) for v in row) + "\n" for row in rows)
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", self.url(db), "-c",
                        f"COPY {table} FROM STDIN"], input=text, check=True, text=True,
                       capture_output=True)


if __name__ == "__main__":
    unittest.main()
