"""Scenario tests: the matrix kernels OpenBLAS runs in our processes.

OpenBLAS before 0.3.25 takes an x86 CPU model it does not know for a
Prescott and runs its SSE3 kernels (src/common/blas_kernels.h); `elasticdl`
starts elasticdl-torch with the kernels the CPU's vector units allow, and
elasticdl-torch started directly starts itself again with them.
`elasticdl --version` names the kernels its process runs.

Environment: ELASTICDL_BIN (the elasticdl binary).
"""
import os
import re
import subprocess
import unittest

BIN = os.environ.get("ELASTICDL_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin/elasticdl"))


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def kernels(env=None, binary=BIN):
    """The kernels `elasticdl --version` says it runs; None without OpenBLAS."""
    out = subprocess.run([binary, "--version"], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    found = re.search(r"\(OpenBLAS: (\w+) kernels\)", out)
    return found.group(1) if found else None


class BlasKernelsTest(unittest.TestCase):

    def setUp(self):
        if kernels() is None:
            self.skipTest("no OpenBLAS in this build")

    def test_a_cpu_with_avx_never_runs_the_prescott_kernels(self):
        flags = cpu_flags()
        if "avx" not in flags:
            self.skipTest("no AVX: the Prescott kernels are this CPU's")
        # Chosen by `elasticdl` before it execs elasticdl-torch, and by
        # elasticdl-torch itself when started directly.
        self.assertNotEqual(kernels(), "Prescott", f"flags: {sorted(flags)}")
        torch = os.path.join(os.path.dirname(BIN), "elasticdl-torch")
        self.assertEqual(kernels(binary=torch), kernels())

    def test_the_users_choice_is_kept(self):
        if not {"avx2", "fma"} <= cpu_flags():
            self.skipTest("no AVX2")
        env = dict(os.environ, OPENBLAS_CORETYPE="Haswell")
        self.assertEqual(kernels(env), "Haswell")


if __name__ == "__main__":
    unittest.main()
