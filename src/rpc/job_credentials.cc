#include "rpc/job_credentials.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/secret.h"
#include "common/strings.h"

namespace elasticdl::rpc {
namespace {

constexpr size_t kTokenBytes = 32;
constexpr char kTokenPemName[] = "ELASTICDL JOB TOKEN";
constexpr char kFileHeader[] =
    "# An ElasticDL job's credentials (rpc/job_credentials.h): its token, its certificate and\n"
    "# key, and the certificate of the job's own CA. Anyone holding this file can act as the\n"
    "# job: keep it secret.\n";

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PKeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using PKey = std::unique_ptr<EVP_PKEY, PKeyFree>;

// OpenSSL's queued errors as text (emptying the queue).
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown error" : out;
}

Status OpenSslError(std::string_view what) {
  return absl::InternalError(StrCat(what, ": ", OpenSslErrors()));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? static_cast<size_t>(n) : 0);
}

std::string Hex(const unsigned char* bytes, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
  if (ext == nullptr) return OpenSslError(StrCat("certificate extension ", value));
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) return OpenSslError(StrCat("certificate extension ", value));
  return absl::OkStatus();
}

// A certificate for `key` named `common_name`, signed by `issuer_key` on
// behalf of `issuer` (nullptr: self-signed, a CA).
StatusOr<Certificate> Issue(const char* common_name, EVP_PKEY* key, X509* issuer,
                            EVP_PKEY* issuer_key, int days) {
  Certificate cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), 2) != 1) return OpenSslError("X509_new");
  std::unique_ptr<BIGNUM, BnFree> serial(BN_new());
  if (serial == nullptr || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return OpenSslError("certificate serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * days) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("certificate validity");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(common_name), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name) !=
          1) {
    return OpenSslError("certificate name");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  EDL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash"));
  if (issuer == nullptr) {
    EDL_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    EDL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_key_usage, "critical,keyCertSign"));
  } else {
    EDL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE"));
    EDL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature"));
    EDL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_ext_key_usage, "serverAuth,clientAuth"));
    EDL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_subject_alt_name,
                                     StrCat("DNS:", kJobServerName).c_str()));
    EDL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid"));
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return OpenSslError("signing");
  return cert;
}

StatusOr<std::string> CertificatePem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), cert) != 1) return OpenSslError("PEM");
  return BioText(bio.get());
}

StatusOr<PKey> NewKey() {
  PKey key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpenSslError("generating a P-256 key");
  return key;
}

// One PEM block as written by PEM_write_bio.
StatusOr<std::string> PemBlock(const char* name, const unsigned char* data, long n) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio(bio.get(), name, "", data, n) <= 0) {
    return OpenSslError("PEM");
  }
  return BioText(bio.get());
}

StatusOr<std::vector<unsigned char>> Unhex(std::string_view hex) {
  std::vector<unsigned char> out;
  if (hex.size() % 2 != 0) return absl::InvalidArgumentError("odd length");
  for (size_t i = 0; i < hex.size(); i += 2) {
    int v = 0;
    for (char c : hex.substr(i, 2)) {
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else {
        return absl::InvalidArgumentError("not hexadecimal");
      }
    }
    out.push_back(static_cast<unsigned char>(v));
  }
  return out;
}

}  // namespace

StatusOr<JobCredentials> GenerateJobCredentials(bool tls, int days) {
  JobCredentials out;
  EDL_ASSIGN_OR_RETURN(out.token, RandomHex(kTokenBytes));
  if (!tls) return out;
  EDL_ASSIGN_OR_RETURN(PKey ca_key, NewKey());
  EDL_ASSIGN_OR_RETURN(PKey key, NewKey());
  EDL_ASSIGN_OR_RETURN(Certificate ca,
                       Issue("ElasticDL job CA", ca_key.get(), nullptr, ca_key.get(), days));
  EDL_ASSIGN_OR_RETURN(Certificate cert,
                       Issue(kJobServerName, key.get(), ca.get(), ca_key.get(), days));
  EDL_ASSIGN_OR_RETURN(out.ca_certificate, CertificatePem(ca.get()));
  EDL_ASSIGN_OR_RETURN(out.certificate, CertificatePem(cert.get()));
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("PEM");
  }
  out.private_key = BioText(bio.get());
  // ca_key goes out of scope here: nothing else can be issued under the CA.
  return out;
}

std::string EncodeJobCredentials(const JobCredentials& credentials) {
  std::string out = kFileHeader;
  StatusOr<std::vector<unsigned char>> token = Unhex(credentials.token);
  if (token.ok()) {
    StatusOr<std::string> block =
        PemBlock(kTokenPemName, token->data(), static_cast<long>(token->size()));
    if (block.ok()) out += *block;
  }
  return StrCat(out, credentials.certificate, credentials.private_key, credentials.ca_certificate);
}

StatusOr<JobCredentials> DecodeJobCredentials(std::string_view text, const std::string& where) {
  auto invalid = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat(where, ": not a job's credentials file: ", why));
  };
  const absl::string_view stripped =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (stripped.size() == 2 * kTokenBytes &&
      Unhex(std::string_view(stripped.data(), stripped.size())).ok()) {
    return invalid(
        "it holds a bare job token, the form of the old token file; jobs now use mutual TLS: "
        "pass the job's credentials file (<job_dir>/credentials)");
  }
  Bio bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  if (bio == nullptr) return OpenSslError("BIO");
  JobCredentials out;
  std::vector<Certificate> certificates;
  ERR_clear_error();
  for (int block = 1;; ++block) {
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* data = nullptr;
    long n = 0;
    if (PEM_read_bio(bio.get(), &name, &header, &data, &n) != 1) {
      const unsigned long e = ERR_peek_last_error();
      if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
        ERR_clear_error();
        break;  // no block after the last one
      }
      return invalid(StrCat("PEM block ", block, ": ", OpenSslErrors()));
    }
    const std::string kind = name;
    const std::vector<unsigned char> bytes(data, data + n);
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(data);
    if (kind == kTokenPemName) {
      if (bytes.size() != kTokenBytes || !out.token.empty()) {
        return invalid(
            StrCat("block ", block, ": a token is one block of ", kTokenBytes, " bytes"));
      }
      out.token = Hex(bytes.data(), bytes.size());
    } else if (kind == "CERTIFICATE") {
      const unsigned char* p = bytes.data();
      Certificate cert(d2i_X509(nullptr, &p, static_cast<long>(bytes.size())));
      if (cert == nullptr) return invalid(StrCat("block ", block, ": ", OpenSslErrors()));
      certificates.push_back(std::move(cert));
    } else if (kind == "PRIVATE KEY") {
      if (!out.private_key.empty()) return invalid("more than one private key");
      EDL_ASSIGN_OR_RETURN(out.private_key,
                           PemBlock(kind.c_str(), bytes.data(), static_cast<long>(bytes.size())));
    } else {
      return invalid(StrCat("block ", block, " is a ", kind));
    }
  }
  if (out.token.empty()) return invalid("no ELASTICDL JOB TOKEN block");
  if (certificates.empty() && out.private_key.empty()) return out;  // --insecure_transport

  X509* ca = nullptr;
  X509* cert = nullptr;
  for (Certificate& c : certificates) {
    X509*& slot = X509_check_ca(c.get()) > 0 ? ca : cert;
    if (slot != nullptr) return invalid("a CA certificate and one issued by it are expected");
    slot = c.get();
  }
  if (ca == nullptr || cert == nullptr || out.private_key.empty()) {
    return invalid("a token, a certificate, its private key and the job CA's certificate");
  }
  EVP_PKEY* ca_public = X509_get0_pubkey(ca);
  if (ca_public == nullptr || X509_verify(cert, ca_public) != 1) {
    ERR_clear_error();
    return invalid("the certificate was not issued by the CA beside it");
  }
  Bio key_bio(BIO_new_mem_buf(out.private_key.data(), static_cast<int>(out.private_key.size())));
  PKey key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr || X509_check_private_key(cert, key.get()) != 1) {
    ERR_clear_error();
    return invalid("the private key is not the certificate's");
  }
  EDL_ASSIGN_OR_RETURN(out.ca_certificate, CertificatePem(ca));
  EDL_ASSIGN_OR_RETURN(out.certificate, CertificatePem(cert));
  return out;
}

StatusOr<JobCredentials> CreateJobCredentials(const std::string& job_dir, bool tls,
                                              bool local_sockets) {
  EDL_ASSIGN_OR_RETURN(JobCredentials credentials, GenerateJobCredentials(tls));
  const std::string path = CredentialsFile(job_dir);
  // A file of its own: whatever had the name (an earlier run's credentials,
  // a link planted to make us write elsewhere) goes, and the new one is
  // created exclusively, never through a link.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoToStatus(errno, path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoToStatus(errno, path);
  Status written = WriteAll(fd, EncodeJobCredentials(credentials), path);
  if (written.ok() && ::fsync(fd) != 0) written = ErrnoToStatus(errno, path);
  ::close(fd);
  EDL_RETURN_IF_ERROR(written);
  const std::string sockets = SocketsDir(job_dir);
  std::error_code ec;
  std::filesystem::remove_all(sockets, ec);  // an earlier run's, links to dead servers
  if (ec) return absl::InternalError(StrCat(sockets, ": cannot remove: ", ec.message()));
  if (local_sockets) {
    EDL_RETURN_IF_ERROR(CreatePrivateDirectory(sockets, /*exclusive=*/true));
    credentials.socket_dir = sockets;
  }
  return credentials;
}

StatusOr<JobCredentials> ReadJobCredentials(const std::string& job_dir) {
  EDL_ASSIGN_OR_RETURN(JobCredentials credentials, ReadCredentialsFile(CredentialsFile(job_dir)));
  struct stat st {};
  const std::string sockets = SocketsDir(job_dir);
  if (::lstat(sockets.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) credentials.socket_dir = sockets;
  return credentials;
}

StatusOr<JobCredentials> ReadCredentialsFile(const std::string& path) {
  // As ssh takes a private key: only from a file no other user may read or
  // change. Checked on the file as opened, then read from it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoToStatus(errno, path);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(StrCat(path, ": not a file"));
  // Root reads the file of the job's user (a pod running as root on the
  // job directory's volume), as it may read any.
  if (st.st_uid != ::getuid() && ::getuid() != 0) {
    return absl::PermissionDeniedError(
        StrCat(path, ": owned by uid ", st.st_uid, ", not by this user (uid ", ::getuid(),
               "); a credentials file must be this user's alone (mode 0600)"));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return absl::PermissionDeniedError(
        StrCat(path, ": mode ", mode,
               " lets its group or others read or write it; a credentials file must be this "
               "user's alone: chmod 600 ",
               path));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, path);
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return DecodeJobCredentials(text, path);
}

}  // namespace elasticdl::rpc
