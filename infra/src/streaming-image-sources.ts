import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

/** infra/streaming-image: the component documents, build scripts and the files the image installs. */
export const STREAMING_IMAGE_DIR = path.resolve(__dirname, "..", "streaming-image");

/** The host agent as its workspace builds it (`npm run build`): one bundled file and its systemd unit. */
export interface HostAgentArtifacts {
  bundle: string;
  unit: string;
}

export function hostAgentArtifacts(repoRoot: string): HostAgentArtifacts {
  const artifacts = {
    bundle: path.join(repoRoot, "host-agent", "dist", "bundle", "cgs-host-agent.cjs"),
    unit: path.join(repoRoot, "host-agent", "packaging", "cgs-host-agent.service"),
  };
  for (const file of Object.values(artifacts)) {
    if (!fs.existsSync(file)) {
      throw new Error(
        `the streaming image needs ${file}: run \`npm run build\` (the host-agent workspace builds it)`,
      );
    }
  }
  return artifacts;
}

function filesUnder(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]))
    .sort();
}

/** SHA-256 over the relative paths, modes and contents of these files (directories are walked). */
export function contentHash(entries: { base: string; paths: string[] }): string {
  const hash = createHash("sha256");
  for (const p of entries.paths) {
    const files = fs.statSync(p).isDirectory() ? filesUnder(p) : [p];
    for (const file of files) {
      hash.update(path.relative(entries.base, file));
      hash.update(String(fs.statSync(file).mode & 0o777));
      hash.update(fs.readFileSync(file));
    }
  }
  return hash.digest("hex");
}

/**
 * An Image Builder semantic version that changes with the content: Image Builder versions are immutable, so a
 * changed document or recipe needs a new one. Each node may be at most 2^30 - 1.
 */
export function contentVersion(...parts: string[]): string {
  const digest = createHash("sha256").update(parts.join("\0")).digest("hex");
  return `1.0.${parseInt(digest.slice(0, 7), 16)}`;
}
