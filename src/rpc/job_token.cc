#include "rpc/job_token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>

#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"

namespace elasticdl::rpc {
namespace {

constexpr size_t kTokenBytes = 32;

// Compares without returning early, so the time taken does not tell how
// much of a guess was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

StatusOr<std::string> CreateJobToken(const std::string& job_dir) {
  unsigned char bytes[kTokenBytes];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "generating the job token");
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  const std::string path = TokenFile(job_dir);
  // A file of its own: whatever had the name (an earlier job's token, a
  // link planted to make us write elsewhere) goes, and the new one is
  // created exclusively, never through a link.
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoToStatus(errno, path);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoToStatus(errno, path);
  bool ok = write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  int err = errno;
  close(fd);
  if (!ok) return ErrnoToStatus(err, path);
  return token;
}

std::string JobTokenPath(const std::string& job_dir) { return TokenFile(job_dir); }

StatusOr<std::string> ReadJobToken(const std::string& job_dir) {
  const std::string path = JobTokenPath(job_dir);
  EDL_ASSIGN_OR_RETURN(std::string token, ReadFileToString(path));
  if (token.size() != 2 * kTokenBytes) {
    return absl::DataLossError(StrCat(path, ": not a job token (", token.size(), " bytes)"));
  }
  return token;
}

grpc::Status CheckToken(const grpc::ServerContext& context, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kTokenMetadataKey);
  if (it == metadata.end() ||
      !ConstantTimeEquals(std::string_view(it->second.data(), it->second.size()), token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the call lacks this job's token; only processes of the job may call");
  }
  return grpc::Status::OK;
}

void AttachToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata(kTokenMetadataKey, token);
}

}  // namespace elasticdl::rpc
