"""A job's credentials file (src/rpc/job_credentials.h) from Python: read one,
make one of another job (a CA of its own), and open gRPC channels with them.

The file is PEM blocks: the job's token (ELASTICDL JOB TOKEN, 32 bytes), the
job's certificate, its private key, and the job CA's certificate.
"""
import base64
import datetime
import os
import re

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The name every job certificate is issued to; channels check it.
SERVER_NAME = "elasticdl-job"
TOKEN_KEY = "x-elasticdl-token"
_BLOCK = re.compile(r"-----BEGIN ([A-Z ]+)-----\n(.*?)-----END \1-----\n", re.S)


class Credentials:
    def __init__(self, token, certificate, private_key, ca_certificate):
        self.token = token
        self.certificate = certificate
        self.private_key = private_key
        self.ca_certificate = ca_certificate

    def channel(self, address, max_message=1 << 30):
        """A TLS channel to `address` presenting these credentials."""
        tls = grpc.ssl_channel_credentials(root_certificates=self.ca_certificate,
                                           private_key=self.private_key,
                                           certificate_chain=self.certificate)
        return grpc.secure_channel(address, tls, options=[
            ("grpc.ssl_target_name_override", SERVER_NAME),
            ("grpc.max_send_message_length", max_message),
            ("grpc.max_receive_message_length", max_message)])

    def metadata(self, token=None):
        return [(TOKEN_KEY, self.token if token is None else token)]


def read(path):
    """The credentials in the file at `path`."""
    with open(path) as f:
        text = f.read()
    token, certs, key = None, [], None
    for match in _BLOCK.finditer(text):
        kind, block = match.group(1), match.group(0).encode()
        if kind == "ELASTICDL JOB TOKEN":
            token = base64.b64decode(match.group(2)).hex()
        elif kind == "CERTIFICATE":
            certs.append(block)
        elif kind == "PRIVATE KEY":
            key = block
    # The job's certificate comes first, the CA's last.
    return Credentials(token, certs[0], key, certs[-1])


def _pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def write_other_job(path):
    """Writes the credentials of another job (a CA of its own) to `path`, 0600;
    returns them."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "another job's CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAME)]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(SERVER_NAME)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    token = os.urandom(32)
    text = ("-----BEGIN ELASTICDL JOB TOKEN-----\n" + base64.b64encode(token).decode() +
            "\n-----END ELASTICDL JOB TOKEN-----\n")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + _pem(cert).decode() + key_pem.decode() + _pem(ca).decode())
    return Credentials(token.hex(), _pem(cert), key_pem, _pem(ca))
