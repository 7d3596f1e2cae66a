#!/usr/bin/env python3
"""clang-tidy over translation units, a directory's units at a time.

Usage: [CLANG_TIDY=clang-tidy-22] lint_tidy.py BUILD_DIR UNIT...

Most of clang-tidy's time goes to matching its checks against the headers a
unit includes (gRPC, protobuf, spdlog, CLI11), the same headers for every
unit of a directory. So the units of one directory that share a compile
command are checked together, as one file that #includes them (in
BUILD_DIR/lint/): each header is matched once per group, not once per unit.
A group whose combined file does not compile (two units' file-local helpers
of one name) is checked unit by unit instead, and the output says so: that
costs a header pass per unit. Diagnostics name the units'
own files and lines either way.

Exit status 1 when clang-tidy reports anything, as `clang-tidy` would.
"""
import collections
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

CLANG_TIDY = os.environ.get("CLANG_TIDY", "clang-tidy-22")


def main():
    build_dir, units = sys.argv[1], [os.path.abspath(u) for u in sys.argv[2:]]
    commands = compile_commands(build_dir)
    missing = [u for u in units if u not in commands]
    if missing:
        print(f"lint: no compile command for {missing[0]} (re-run cmake)", file=sys.stderr)
        return 1
    groups = collections.defaultdict(list)
    for u in units:
        flags, cwd = commands[u]
        groups[(os.path.dirname(u), flags, cwd)].append(u)

    lint_dir = os.path.abspath(os.path.join(build_dir, "lint"))
    os.makedirs(lint_dir, exist_ok=True)
    entries, jobs = [], []
    for i, ((directory, flags, cwd), members) in enumerate(sorted(groups.items())):
        args = [a for a in flags if a not in ("-c", "-o")]
        # Every unit has its own entry too: a group that does not compile as
        # one file is checked unit by unit.
        entries += [{"directory": cwd, "file": m,
                     "command": " ".join(shlex.quote(a) for a in args + ["-c", m])} for m in members]
        if len(members) == 1:
            jobs.append(("unit", members))
            continue
        path = os.path.join(lint_dir, f"group_{i}.cc")
        text = "".join(f'#include "{m}"  // NOLINT(bugprone-suspicious-include)\n' for m in members)
        old = open(path).read() if os.path.exists(path) else None
        if old != text:
            with open(path, "w") as f:
                f.write(text)
        entries.append({"directory": cwd, "file": path,
                        "command": " ".join(shlex.quote(a) for a in args + ["-c", path])})
        jobs.append(("group", members, path))
    with open(os.path.join(lint_dir, "compile_commands.json"), "w") as f:
        json.dump(entries, f)

    # Our headers only, by their place in this checkout: .clang-tidy's
    # HeaderFilterRegex matches anywhere in a path, so a checkout under a
    # directory named src/ would take the generated protobuf headers of its
    # build directory for ours.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    header_filter = "^" + re.escape(root) + "/(include/elasticdl|src)/"
    # The checkout's checks, named: clang-tidy looks for .clang-tidy above each
    # file it checks, and the grouped files live in the build directory, which
    # may be outside the checkout.
    config = os.path.join(root, ".clang-tidy")

    def tidy(db, files):
        r = subprocess.run([CLANG_TIDY, "-p", db, "--quiet", f"--config-file={config}",
                            f"--header-filter={header_filter}", *files],
                           capture_output=True, text=True)
        return r.returncode, r.stdout

    def first_error(out):
        return next((line for line in out.splitlines() if "clang-diagnostic-error" in line), None)

    failed = False

    def report(code, out):
        nonlocal failed
        if code != 0 or out.strip():
            failed = True
            sys.stdout.write(out)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        # Groups first: they are the longest.
        groups = [(job, pool.submit(tidy, lint_dir, [job[2]])) for job in jobs if job[0] == "group"]
        singles = [pool.submit(tidy, lint_dir, job[1]) for job in jobs if job[0] == "unit"]
        for job, future in groups:
            code, out = future.result()
            error = first_error(out)
            if error is None:
                report(code, out)
                continue
            # Does not compile as one file (two units' file-local names
            # clash): each unit on its own, in parallel, at a unit's cost.
            print(f"lint: {os.path.dirname(job[1][0])} checked unit by unit, not as one file: {error}",
                  file=sys.stderr)
            singles += [pool.submit(tidy, lint_dir, [m]) for m in job[1]]
        for future in singles:
            report(*future.result())
    return 1 if failed else 0


def compile_commands(build_dir):
    """Each source file's compile flags (without its input and output) and
    directory, from BUILD_DIR/compile_commands.json. A file compiled in a unity
    unit (CMake's UNITY_BUILD: Unity/unity_N_cxx.cxx #includes it) has the
    unit's flags."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    out = {}
    for e in entries:
        path = os.path.abspath(os.path.join(e["directory"], e["file"]))
        args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
        rel = os.path.relpath(path, e["directory"])
        flags = [a for a in args if a != path and a != e["file"] and not a.endswith(rel)]
        # Drop the output of the unit itself, and a precompiled header a unit
        # of several files has (each file includes what it uses): GCC's
        # "-include cmake_pch.hxx", clang's "-Xclang -include-pch -Xclang
        # cmake_pch.hxx.pch -Xclang -include -Xclang cmake_pch.hxx".
        flags = [a for a in flags if not a.endswith(".o")]
        for i in reversed(range(len(flags) - 1)):
            if flags[i] == "-include" and "cmake_pch.hxx" in flags[i + 1]:
                del flags[i:i + 2]
            elif (flags[i:i + 1] == ["-Xclang"] and flags[i + 1] in ("-include", "-include-pch") and
                  flags[i + 2:i + 3] == ["-Xclang"] and "cmake_pch.hxx" in "".join(flags[i + 3:i + 4])):
                del flags[i:i + 4]
        flags = tuple(flags)
        sources = [path]
        if os.path.basename(os.path.dirname(path)) == "Unity":
            with open(path) as unit:
                sources = [line.split('"')[1] for line in unit if line.startswith("#include \"")]
        for source in sources:
            out[os.path.abspath(source)] = (flags, e["directory"])
    return out


if __name__ == "__main__":
    sys.exit(main())
