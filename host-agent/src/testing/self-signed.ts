import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** A self-signed certificate like the one Sunshine makes for itself (openssl from Debian). */
export function selfSignedCertificate(commonName = "sunshine"): {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
  sha256: string;
} {
  const dir = mkdtempSync(path.join(tmpdir(), "cert-"));
  const keyFile = path.join(dir, "key.pem");
  const certFile = path.join(dir, "cert.pem");
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"].concat([
      "-subj",
      `/CN=${commonName}`,
      "-days",
      "2",
      "-keyout",
      keyFile,
      "-out",
      certFile,
    ]),
    { stdio: "ignore" },
  );
  const cert = readFileSync(certFile, "utf8");
  return {
    certFile,
    keyFile,
    cert,
    key: readFileSync(keyFile, "utf8"),
    sha256: new X509Certificate(cert).fingerprint256.replace(/:/g, "").toLowerCase(),
  };
}
