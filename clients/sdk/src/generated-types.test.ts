import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

const script = path.join(__dirname, "../scripts/generate-types.mjs");
const check = (...args: string[]) =>
  spawnSync(process.execPath, [script, "--check", ...args], { encoding: "utf8" });

describe("generated types", () => {
  test("when shared/openapi.json is unchanged, then the committed types match what it generates", () => {
    const result = check();
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  test("when the contract gains an operation, then the check fails and says how to regenerate", () => {
    const spec = JSON.parse(readFileSync(path.join(__dirname, "../../../shared/openapi.json"), "utf8"));
    spec.paths["/api/v1/new-thing"] = {
      get: { operationId: "newThing", responses: { 204: { description: "ok" } } },
    };
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), "sdk-spec-")), "openapi.json");
    writeFileSync(file, JSON.stringify(spec));
    const result = check("--spec", file);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("npm run generate -w @cgs/sdk");
  });
});
