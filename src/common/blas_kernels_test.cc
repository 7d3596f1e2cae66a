#include "common/blas_kernels.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace elasticdl {
namespace {

TEST(BlasKernelsTest, ThePrescottFallbackGivesWayToTheWidestUnitsTheCpuHas) {
  CpuVectorUnits cpu;
  EXPECT_EQ(BetterBlasKernels("Prescott", cpu), std::nullopt);  // no AVX: Prescott is right
  cpu.avx = true;
  EXPECT_EQ(BetterBlasKernels("Prescott", cpu), "Sandybridge");
  cpu.avx2_fma = true;
  EXPECT_EQ(BetterBlasKernels("Prescott", cpu), "Haswell");
  cpu.avx512 = true;
  EXPECT_EQ(BetterBlasKernels("Prescott", cpu), "SkylakeX");
  cpu.avx512_bf16 = true;
  EXPECT_EQ(BetterBlasKernels("Prescott", cpu), "Cooperlake");
}

TEST(BlasKernelsTest, KernelsPickedForAKnownCpuAreLeftAlone) {
  CpuVectorUnits cpu{true, true, true, true};
  EXPECT_EQ(BetterBlasKernels("SkylakeX", cpu), std::nullopt);
  EXPECT_EQ(BetterBlasKernels("Haswell", cpu), std::nullopt);
  EXPECT_EQ(BetterBlasKernels("", cpu), std::nullopt);  // no OpenBLAS
}

TEST(BlasKernelsTest, TheProgramStartedAgainKeepsTheChoiceFromWhatItStarts) {
  ASSERT_EQ(setenv("OPENBLAS_CORETYPE", "SkylakeX", 1), 0);
  ASSERT_EQ(setenv(kOpenblasCoretypeChosenVariable, "1", 1), 0);
  const Environment env = ReadEnvironment();
  ASSERT_TRUE(env.openblas_coretype_chosen);
  char* argv[] = {nullptr};
  EXPECT_EQ(UseTheCpusBlasKernels(argv, env), "");
  EXPECT_FALSE(ReadEnvironment().openblas_coretype_chosen);
  EXPECT_EQ(ReadEnvironment().openblas_coretype, "");
}

TEST(BlasKernelsTest, AnExecIsGivenKernelsOnlyWhereOpenBlasFallsBackToPrescott) {
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kOpenblasCoretypeChosenVariable);
  void* blas = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (blas == nullptr) GTEST_SKIP() << "no OpenBLAS: " << dlerror();
  using CoreName = char* (*)();
  auto core_name = reinterpret_cast<CoreName>(dlsym(blas, "openblas_get_corename"));
  ASSERT_NE(core_name, nullptr);
  const std::optional<std::string> better = BetterBlasKernels(core_name(), ThisCpu());
  ChooseBlasKernelsBeforeExec(ReadEnvironment());
  const Environment chosen = ReadEnvironment();
  EXPECT_EQ(chosen.openblas_coretype, better.value_or(""));
  EXPECT_EQ(chosen.openblas_coretype_chosen, better.has_value());
  // The user's choice stands.
  ASSERT_EQ(setenv("OPENBLAS_CORETYPE", "Haswell", 1), 0);
  unsetenv(kOpenblasCoretypeChosenVariable);
  ChooseBlasKernelsBeforeExec(ReadEnvironment());
  EXPECT_EQ(ReadEnvironment().openblas_coretype, "Haswell");
  EXPECT_FALSE(ReadEnvironment().openblas_coretype_chosen);
  unsetenv("OPENBLAS_CORETYPE");
}

TEST(BlasKernelsTest, ThisCpuAgreesWithTheKernelsFlags) {
#if defined(__x86_64__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string flag; words >> flag;) flags.insert(flag);
    break;
  }
  ASSERT_FALSE(flags.empty()) << "no flags in /proc/cpuinfo";
  auto has = [&flags](const char* flag) { return flags.count(flag) != 0; };
  const CpuVectorUnits cpu = ThisCpu();
  EXPECT_EQ(cpu.avx, has("avx"));
  EXPECT_EQ(cpu.avx2_fma, has("avx2") && has("fma"));
  EXPECT_EQ(cpu.avx512, has("avx512f") && has("avx512cd") && has("avx512bw") && has("avx512dq") &&
                            has("avx512vl"));
  EXPECT_EQ(cpu.avx512_bf16, cpu.avx512 && has("avx512_bf16"));
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

}  // namespace
}  // namespace elasticdl
