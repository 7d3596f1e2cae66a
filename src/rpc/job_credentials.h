// What the processes of a job hold to call one another: the job's own
// certificate authority, a certificate it issued, and a token.
//
// The client makes them when it starts a job (`train`, `evaluate`,
// `predict`): a new CA, whose key is thrown away once it has signed the
// job's certificate, so no other certificate can ever be issued under it.
// Every gRPC server of the job (master, parameter servers) speaks TLS and
// requires a client certificate of that CA; every channel presents the job's
// certificate and accepts only a server that has one. The token is a second
// factor checked before a request's body is read (rpc/grpc_util.h).
//
// All of it lives in one PEM file, `<job_dir>/credentials` (mode 0600 in a
// 0700 job directory): the processes of the job read it there, and a worker
// joining from another host (`worker --master=... --credentials_file=...`) is
// handed a copy. A job started with --insecure_transport has a token only,
// and its calls go in plaintext.
//
// Processes that read the credentials from the job directory also share its
// `sockets/` directory: servers listen there on Unix sockets too, and a
// caller on the same machine calls through one instead of TCP. Only the
// job's user (and root, who can read the credentials file anyway) can enter
// the 0700 job directory, so the kernel has made the check that the client
// certificate makes on TCP; such a call never reaches a network, so it goes
// without TLS. The token is still checked before the body is read.
#ifndef ELASTICDL_RPC_JOB_CREDENTIALS_H_
#define ELASTICDL_RPC_JOB_CREDENTIALS_H_

#include <string>
#include <string_view>

#include "elasticdl/status.h"

namespace elasticdl::rpc {

struct JobCredentials {
  // 64 hex digits, carried on every call (job_token.h). Empty: calls are not
  // checked (in-process tests only; a credentials file always has one).
  std::string token;
  // PEM. All three empty: plaintext transport.
  std::string ca_certificate;  // the job's CA
  std::string certificate;     // issued by the CA, for both ends of a call
  std::string private_key;     // the certificate's key (PKCS #8)

  // The job's sockets directory (`<job_dir>/sockets`), for processes that
  // share the job directory; empty for a credentials file read elsewhere (a
  // worker on another host) or a job run with --local_sockets=false: TCP
  // only.
  std::string socket_dir;

  bool uses_tls() const { return !certificate.empty(); }
};

// The name every certificate of a job is issued to, and that channels check
// the server's certificate against (whatever address they dial: processes
// move between hosts; the job's private CA is what makes the name mean "a
// process of this job").
inline constexpr char kJobServerName[] = "elasticdl-job";

// New credentials: a token, and unless `tls` is false a new CA and a
// certificate it signed (ECDSA P-256, valid from an hour ago, for clocks a
// little apart, for `days`).
StatusOr<JobCredentials> GenerateJobCredentials(bool tls = true, int days = 366);

// `credentials` as the text of a credentials file, and back. Decode names
// `where` (the file) in its errors; a file holding only a token (the form of
// the token file, which credentials files replaced) is refused with a
// message saying so.
std::string EncodeJobCredentials(const JobCredentials& credentials);
StatusOr<JobCredentials> DecodeJobCredentials(std::string_view text, const std::string& where);

// Generates credentials and writes them to `<job_dir>/credentials`, created
// exclusively (whatever had the name goes first, a link included), 0600. The
// result, like ReadJobCredentials', names the job's sockets directory.
// Unless `local_sockets` is false it also creates the job's sockets
// directory (0700); otherwise it removes an earlier run's.
StatusOr<JobCredentials> CreateJobCredentials(const std::string& job_dir, bool tls = true,
                                              bool local_sockets = true);

// The credentials of the job in `job_dir` (with its sockets directory, when
// it has one), or in the file at `path` (without). A file another user owns
// (unless this is root), or whose mode lets its group or others read or
// write it, is refused
// (PERMISSION_DENIED naming it, its mode and `chmod 600`), as ssh refuses
// such a private key.
StatusOr<JobCredentials> ReadJobCredentials(const std::string& job_dir);
StatusOr<JobCredentials> ReadCredentialsFile(const std::string& path);

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_JOB_CREDENTIALS_H_
