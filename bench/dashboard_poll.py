"""A script watching a job's dashboard, for bench/dashboard_bench.sh: once the
job's master serves it (JOB_DIR/dashboard.url), every second the requests the
dashboard page makes (/api/job, /api/curves and /api/events from where the
last answer ended) and a Prometheus scrape of /metrics, over one keep-alive
connection, until killed. Prints "ready" when it waits for the master, and
when killed (SIGTERM) how long the rounds of requests took:
"rounds N median_ms M max_ms X".

    dashboard_poll.py JOB_DIR
"""
import http.client
import json
import os
import signal
import statistics
import sys
import time
import urllib.parse


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def main():
    job_dir = sys.argv[1]
    print("ready", flush=True)
    while not (read(os.path.join(job_dir, "dashboard.url")) and
               read(os.path.join(job_dir, "token"))):
        time.sleep(0.1)
    base = read(os.path.join(job_dir, "dashboard.url"))
    token = read(os.path.join(job_dir, "token"))
    u = urllib.parse.urlsplit(base)
    headers = {"Authorization": f"Bearer {token}"}
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    curves, events = 0, 0
    took = []  # seconds per round of requests answered in full

    def report(*_):
        if took:
            print(f"rounds {len(took)} median_ms {statistics.median(took) * 1e3:.2f} "
                  f"max_ms {max(took) * 1e3:.2f}", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, report)
    while True:
        start = time.monotonic()
        try:
            for path in ["/api/job", f"/api/curves?since={curves}",
                         f"/api/events?since={events}", "/metrics"]:
                conn.request("GET", path, headers=headers)
                res = conn.getresponse()
                body = res.read()
                if res.status != 200:
                    raise OSError(f"{path}: HTTP {res.status}")
                if path.startswith("/api/curves"):
                    curves = json.loads(body)["next"]
                elif path.startswith("/api/events"):
                    events = json.loads(body)["next"]
            took.append(time.monotonic() - start)
        except (OSError, http.client.HTTPException):
            conn.close()  # the master is gone or restarting: connect again
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))


if __name__ == "__main__":
    main()
