import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { parseAllDocuments } from "yaml";

/** Test support: renders charts/cgs-platform with helm (installed on demand by test/peers/helm.sh). */

export const REPO_ROOT = path.resolve(__dirname, "..", "..");
export const CHART_DIR = path.join(REPO_ROOT, "charts", "cgs-platform");
export const KUBE_VERSION = "1.35.0";

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

let helmPath: string | undefined;

export function helm(): string {
  helmPath ??= execFileSync("bash", [path.join(REPO_ROOT, "test", "peers", "helm.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    timeout: 15 * 60_000,
  }).trim();
  return helmPath;
}

export function runHelm(args: string[]): string {
  return execFileSync(helm(), args, { encoding: "utf8", cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
}

export function valuesFile(env: string): string {
  return path.join(CHART_DIR, `values-${env}.yaml`);
}

export function lint(env: string): string {
  return runHelm(["lint", CHART_DIR, "--strict", "-f", valuesFile(env), "--kube-version", KUBE_VERSION]);
}

export function render(env: string, extraArgs: string[] = []): Manifest[] {
  const out = runHelm([
    "template",
    "cgs",
    CHART_DIR,
    "--namespace",
    "cgs",
    "--kube-version",
    KUBE_VERSION,
    "-f",
    valuesFile(env),
    ...extraArgs,
  ]);
  return parseAllDocuments(out)
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}
