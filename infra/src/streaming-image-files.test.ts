import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { bashSteps, checkComponentDocument, type ComponentDocument } from "./awstoe-document";
import { COMPONENT_FILES } from "./components/streaming-image";
import { STREAMING_IMAGE_DIR } from "./streaming-image-sources";

// The files of infra/streaming-image as Image Builder and a streaming instance will see them: component documents
// against AWSTOE's schema, every shell step through Debian's shellcheck, every unit through systemd-analyze.

const componentsDir = path.join(STREAMING_IMAGE_DIR, "components");
const read = (file: string) => fs.readFileSync(path.join(componentsDir, file), "utf8");

function shellcheck(script: string): string {
  const result = spawnSync("shellcheck", ["-S", "warning", "-s", "bash", "-"], {
    input: script,
    encoding: "utf8",
  });
  if (result.error) throw result.error;
  return result.status === 0 ? "" : result.stdout;
}

const scripts = [
  ...fs.readdirSync(path.join(STREAMING_IMAGE_DIR, "build")).map((f) => path.join("build", f)),
  ...fs
    .readdirSync(path.join(STREAMING_IMAGE_DIR, "rootfs/opt/cgs/bin"))
    .map((f) => path.join("rootfs/opt/cgs/bin", f)),
];
// Sourced by those scripts, not run.
const libraries = fs
  .readdirSync(path.join(STREAMING_IMAGE_DIR, "rootfs/opt/cgs/lib"))
  .map((f) => path.join("rootfs/opt/cgs/lib", f));

describe("component documents", () => {
  it("when every document in components/ is checked, then each is a valid AWSTOE document the recipe uses", () => {
    expect(fs.readdirSync(componentsDir).sort()).toEqual([...COMPONENT_FILES].sort());
    for (const file of COMPONENT_FILES) {
      const { problems } = checkComponentDocument(read(file));
      expect({ file, problems }).toEqual({ file, problems: [] });
    }
  });

  it("when a document breaks the format, then the check names the field", () => {
    const base = read("sunshine.yaml");
    const broken = (from: string, to: string) => checkComponentDocument(base.replace(from, to)).problems;
    expect(broken("action: ExecuteBash", "action: ExecuteBsh")).toEqual([
      expect.stringMatching(/^phases\.0\.steps\.0\.action: must be one of ExecuteBash, S3Download/),
    ]);
    expect(broken("schemaVersion: 1.0", "schemaVersion: 2.0")).toEqual(["schemaVersion: must be 1.0"]);
    expect(broken("timeoutSeconds: 1800", "timeoutSeconds: 0")).toEqual([
      "phases.0.steps.0.timeoutSeconds: must be a positive number of seconds, or -1 for no timeout",
    ]);
    expect(broken("- name: build", "- name: bulid")).toEqual([expect.stringMatching(/^phases\.0\.name: /)]);
    expect(broken("{{ SunshineSha256 }}", "{{ SunshineSha512 }}")).toEqual([
      "parameters: {{ SunshineSha512 }} is used but not declared",
      "parameters: SunshineSha256 is declared but never used",
    ]);
    expect(broken("commands:", "command:")).toEqual([
      "phases.0.steps.0.inputs.commands: Required",
      "phases.0.steps.0.inputs: Unrecognized key(s) in object: 'command'",
    ]);
    const s3 = read("streaming-base.yaml").replace('source: "{{ ImageFilesS3Uri }}"', "source: https://x/y");
    expect(checkComponentDocument(s3).problems).toContain(
      "phases.0.steps.0.inputs.0.source: must be an s3://bucket/key URI or a {{ Parameter }}",
    );
    expect(checkComponentDocument(base + "#".repeat(16_000)).problems[0]).toMatch(
      /CreateComponent accepts 16000/,
    );
  });

  it("when a build step runs bash, then it stops at the first failing command", () => {
    for (const file of COMPONENT_FILES) {
      const doc = checkComponentDocument(read(file)).document as ComponentDocument;
      for (const step of bashSteps(doc)) {
        expect({ step: `${file} ${step.name}`, first: step.script.split("\n")[1] }).toEqual({
          step: `${file} ${step.name}`,
          first: "set -euo pipefail",
        });
      }
    }
  });
});

describe("shell", () => {
  it("when shellcheck -S warning reads every ExecuteBash step and every script the image runs, then it finds nothing", () => {
    const findings: Record<string, string> = {};
    for (const file of COMPONENT_FILES) {
      const doc = checkComponentDocument(read(file)).document as ComponentDocument;
      for (const step of bashSteps(doc)) {
        const out = shellcheck(step.script);
        if (out) findings[`${file} ${step.name}`] = out;
      }
    }
    for (const script of [...scripts, ...libraries]) {
      const out = shellcheck(fs.readFileSync(path.join(STREAMING_IMAGE_DIR, script), "utf8"));
      if (out) findings[script] = out;
    }
    expect(findings).toEqual({});
    expect(scripts.length).toBeGreaterThanOrEqual(10);
  });

  it("when a script has a warning-level mistake, then shellcheck reports it (the check can fail)", () => {
    expect(shellcheck('#!/usr/bin/env bash\nrm -rf "$dir"/ $unquoted\n')).toMatch(/SC2086|SC2154/);
  });

  it("when the image installs its scripts, then every one is executable", () => {
    for (const script of scripts) {
      expect({
        script,
        executable: (fs.statSync(path.join(STREAMING_IMAGE_DIR, script)).mode & 0o111) !== 0,
      }).toEqual({
        script,
        executable: true,
      });
    }
  });
});

describe("systemd units", () => {
  /** A root with the machine's systemd units, the image's rootfs and stand-in binaries the units name. */
  function verifyRoot(agentUnit: string): string {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "cgs-units-"));
    fs.cpSync("/lib/systemd/system", path.join(root, "lib/systemd/system"), { recursive: true });
    fs.cpSync(path.join(STREAMING_IMAGE_DIR, "rootfs"), root, { recursive: true });
    fs.mkdirSync(path.join(root, "usr/bin"), { recursive: true });
    for (const bin of ["sunshine", "node", "tailscaled"]) {
      fs.writeFileSync(path.join(root, "usr/bin", bin), "#!/bin/sh\n", { mode: 0o755 });
    }
    fs.writeFileSync(
      path.join(root, "lib/systemd/system/tailscaled.service"),
      "[Service]\nExecStart=/usr/bin/tailscaled\n",
    );
    fs.writeFileSync(path.join(root, "etc/systemd/system/cgs-host-agent.service"), agentUnit);
    return root;
  }

  function verify(root: string): { status: number | null; output: string } {
    const units = [
      "cgs-boot.service",
      "cgs-display.service",
      "cgs-sunshine.service",
      "cgs-host-agent.service",
      "cgs-assign.service",
      "cgs-assign.path",
    ].map((u) => `/etc/systemd/system/${u}`);
    const result = spawnSync("systemd-analyze", ["verify", `--root=${root}`, "--man=no", ...units], {
      encoding: "utf8",
    });
    return { status: result.status, output: `${result.stdout}${result.stderr}`.trim() };
  }

  // The host agent's own unit is the host-agent workspace's; this is its contract (ExecStart and env files).
  const agentUnit = [
    "[Unit]",
    "Description=Host agent",
    "[Service]",
    "EnvironmentFile=/etc/cgs/agent.env",
    "EnvironmentFile=/etc/cgs/sunshine-credentials.env",
    "ExecStart=/usr/bin/node /opt/cgs/host-agent/cgs-host-agent.cjs",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  ].join("\n");

  it("when systemd-analyze verifies the image's units with the agent's drop-in, then it reports nothing", () => {
    const root = verifyRoot(agentUnit);
    try {
      expect(verify(root)).toEqual({ status: 0, output: "" });
      const merged = execFileSync(
        "systemd-analyze",
        ["cat-config", `--root=${root}`, "systemd/system/cgs-host-agent.service"],
        {
          encoding: "utf8",
        },
      );
      expect(merged).toContain("After=cgs-boot.service cgs-display.service cgs-sunshine.service");
      expect(merged).toContain("SUNSHINE_CERT_FILE=/var/lib/cgs/volume/sunshine/credentials/cacert.pem");
      // The standby agent writes its assignment spool and keeps its TLS identity despite ProtectSystem=strict.
      expect(merged).toContain("RuntimeDirectory=cgs/assign");
      expect(merged).toContain("StateDirectory=cgs-agent");
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it("when a unit carries a misspelt key, then systemd-analyze reports it (the check can fail)", () => {
    const root = verifyRoot(agentUnit);
    try {
      const unit = path.join(root, "etc/systemd/system/cgs-sunshine.service");
      fs.writeFileSync(unit, fs.readFileSync(unit, "utf8").replace("Requires=", "Requries="));
      expect(verify(root).output).toMatch(/Unknown key 'Requries'/);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
