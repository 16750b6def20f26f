// Bundles the host agent into one file the streaming image installs (/opt/cgs/host-agent/cgs-host-agent.cjs):
// Node 24 on the instance runs it with no node_modules beside it.
import { build } from "esbuild";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

/** Writes the bundle; `outfile` defaults to dist/bundle/cgs-host-agent.cjs. */
export async function bundleHostAgent(
  outfile = path.join(here, "..", "dist", "bundle", "cgs-host-agent.cjs"),
) {
  await build({
    entryPoints: [path.join(here, "..", "src", "main.ts")],
    outfile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "cjs",
    minify: false,
    sourcemap: false,
    legalComments: "none",
    logLevel: "warning",
  });
  return outfile;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = await bundleHostAgent(process.argv[2]);
  console.error(`[host-agent] bundled ${path.relative(process.cwd(), out)}`);
}
