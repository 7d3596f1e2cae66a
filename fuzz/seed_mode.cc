#include "seed_mode.h"

#include <cstdio>
#include <cstdlib>

#include "common/file.h"

namespace elasticdl::fuzz {

void HandleSeedFlag(int argc, char** argv, const SeedWriter& write) {
  constexpr std::string_view kFlag = "--write_seeds=";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    if (arg.substr(0, kFlag.size()) != kFlag) continue;
    std::string dir(arg.substr(kFlag.size()));
    Status s = CreateDirectories(dir);
    if (s.ok()) s = write(dir);
    if (!s.ok()) {
      std::fprintf(stderr, "writing seeds to %s: %s\n", dir.c_str(), s.ToString().c_str());
      std::exit(1);
    }
    std::fprintf(stderr, "wrote seeds to %s\n", dir.c_str());
    std::exit(0);
  }
}

Status WriteSeed(const std::string& dir, std::string_view name, std::string_view contents) {
  EDL_ASSIGN_OR_RETURN(auto file, WritableFile::Create(dir + "/" + std::string(name)));
  EDL_RETURN_IF_ERROR(file->Append(contents));
  return file->Close();
}

}  // namespace elasticdl::fuzz
