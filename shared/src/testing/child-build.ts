import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

const sharedSrc = path.resolve(__dirname, "..");

/**
 * A new directory for a test's child-process build, under the repository's node_modules/.cache so the children
 * resolve packages the way a built service does. The test removes it when done.
 */
export function childBuildDir(name: string): string {
  return path.resolve(sharedSrc, "../../node_modules/.cache", `${name}-${randomBytes(4).toString("hex")}`);
}

/**
 * Transpiles shared sources (absolute paths under shared/src) to CommonJS in buildDir, at the same relative paths,
 * so a test can start a child process on the current sources without depending on a fresh `tsc -b`.
 */
export function transpileForChildren(files: readonly string[], buildDir: string): void {
  for (const file of files) {
    const output = ts.transpileModule(readFileSync(file, "utf8"), {
      compilerOptions: {
        module: ts.ModuleKind.CommonJS,
        target: ts.ScriptTarget.ES2022,
        esModuleInterop: true,
      },
      fileName: file,
    }).outputText;
    const target = path.join(buildDir, path.relative(sharedSrc, file)).replace(/\.ts$/, ".js");
    mkdirSync(path.dirname(target), { recursive: true });
    writeFileSync(target, output);
  }
}
